#!/usr/bin/env python3
"""H200 drift studies: how the error of a 16-bit recurrent state grows with length, across prompts.

One command runs, within --max-minutes, for each part in --parts (a model in a weights dtype):
  ref-bf16-weights / ref-fp32-weights   the shipped reference model (evalkit.reference_model);
  48b-bf16-weights / 48b-fp32-weights   random weights at Kimi-Linear-48B dims (all 27 layers in
                                        bf16; in fp32 the first --layers-48b-fp32 = 4, one hybrid
                                        block of 3 KDA + 1 MLA: true fp32 GEMMs and attention
                                        run on the GPU's SIMT units, several times slower),
an `evalkit drift` study (evalkit.drift.study): --prompts prompts (kv_retrieval docs for the
reference model, random ids for random weights) of --ref-length / --length-48b tokens, prefill and
decode modes, the fp32 reference arm, --arms and the A/A floor arm, growth exponents per prompt
with sensitivity rows (from 1k / 4k / 16k). Each part gets a share of the budget proportional to
its estimated cost (evalkit.drift.campaign.estimate_seconds, from the H200 throughputs in
results/drift); a mode stops taking prompts when the next would overrun, and every prompt it
finished is on disk (runs/<part>/, rewritten after each prompt; summary.json and note.md at the top
after each part).

Run (repository root, on the lent H200):
    python scripts/gpu_drift.py --out $OUT/drift --max-minutes 8
    python scripts/gpu_drift.py --out /tmp/x --estimate ...   # the plan and its predicted seconds, no GPU
A study longer than one call (the 48B-dims parts at 128k: ~42 minutes measured for bf16 weights,
the fp32 part not yet measured) runs in several (scripts/drift_resume_call.sh): each call with the
same options plus --resume, its --out holding the last call's runs/<part>/ (samples.jsonl:
finished prompts are not run again; the summary is the one an uninterrupted run would write).
CPU check of the script (tiny widths, not a result):
    python scripts/gpu_drift.py --out /tmp/gd --device cpu --smoke --ref-model CKPT --prompts 2 \
        --ref-length 512 --ref-chunk 64 --length-48b 256 --chunk-48b 64 --decode-block 64
"""

from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


try:
    from evalkit.bench import harness
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(REPO))
    from evalkit.bench import harness

CLOCK = harness.Clock(T0)
log = harness.Log(CLOCK)


def bootstrap_evalkit() -> None:
    """Import evalkit from this checkout, mapping kernels/ and tasks/ as setup.py does."""
    if harness.import_checkout():
        log("evalkit imported from the checkout (kernels/ and tasks/ mapped into the namespace)")


def find_ref_model(arg: str | None) -> str | None:
    if arg:
        return arg if Path(arg).exists() else None
    try:
        from evalkit import reference_model

        return str(reference_model.default_model_path())
    except Exception:  # noqa: BLE001 - the part is simply skipped
        return None


def ssd_dims(path: str | None) -> dict | None:
    """The SSD head dims (H, G, P, N) of a Mamba2-family checkpoint at `path`; None for another
    family or an unreadable config."""
    try:
        from evalkit.model.families import parse_any_config

        arch = parse_any_config(json.loads((Path(path) / "config.json").read_text()))
    except Exception:  # noqa: BLE001 - no model, or not one this check applies to
        return None
    if arch.recurrence != "ssd":
        return None
    return {"H": arch.mamba_num_heads, "G": arch.n_groups, "P": arch.mamba_head_dim, "N": arch.ssm_state_size}


def kernel_check(args) -> dict:
    """Drift's one-launch decode kernel against the engine's decode kernel at real dims."""
    import torch

    if not torch.cuda.is_available() or not args.fused_decode:
        return {
            "skipped": True,
            "fused_decode": False if not torch.cuda.is_available() else args.fused_decode,
        }
    try:
        from evalkit.kernels.kda_decode.recurrent import check_against_decode_loop

        rep = check_against_decode_loop(H=32, K=128, V=128, T=256, device="cuda")
        from evalkit.kernels.ssd_decode.recurrent import check_against_decode_loop as ssd_check

        rep["ssd"] = ssd_check(H=128, G=8, P=64, N=128, T=256, device="cuda")  # NemotronH's head dims
        rep["ok"] = rep["ok"] and rep["ssd"]["ok"]
        dims = ssd_dims(find_ref_model(args.ref_model))
        if dims:  # the reference model's own head dims too: its build is another compiled kernel
            rep["ssd_ref_model"] = ssd_check(**dims, T=256, device="cuda")
            rep["ok"] = rep["ok"] and rep["ssd_ref_model"]["ok"]
    except Exception as exc:  # noqa: BLE001
        rep = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    if not rep.get("ok"):
        args.fused_decode = False
        log(f"decode kernel check FAILED ({rep}); decode mode falls back to one decode launch per token")
    else:
        log(
            "decode kernel check passed: "
            + ", ".join(
                f"{d}: state vs loop {rep[d]['state_vs_loop']:.2e} (effect {rep[d]['effect']:.2e}, "
                f"bit-identical {rep[d]['bit_identical']})"
                for d in ("fp32", "fp16", "bf16")
            )
            + "".join(
                f"; SSD at {rep[key]['shape']}, bit-identical per format: "
                + ", ".join(
                    f"{d} {r['bit_identical']}"
                    for d, r in rep[key].items()
                    if isinstance(r, dict) and "effect" in r
                )
                for key in ("ssd", "ssd_ref_model")
                if key in rep
            )
        )
    rep["fused_decode"] = args.fused_decode
    return rep


def plan(args):
    from evalkit.drift.campaign import Part

    out = []
    for name in [p.strip() for p in args.parts.split(",") if p.strip()]:
        name = {"ref": "ref-bf16", "48b": "48b-bf16"}.get(name, name)  # the names before weight variants
        kind, _, weights = name.partition("-")
        weights = weights.replace("-weights", "")
        if kind not in ("ref", "48b") or weights not in ("bf16", "fp32"):
            raise SystemExit(f"unknown part {name!r}: ref-bf16, ref-fp32, 48b-bf16, 48b-fp32")
        if kind == "ref":
            out.append(Part(kind, weights, args.ref_length, args.prompts, args.ref_chunk))
        else:
            layers = args.layers_48b if weights == "bf16" else args.layers_48b_fp32
            out.append(Part(kind, weights, args.length_48b, args.prompts, args.chunk_48b, layers))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-minutes", type=float, default=8.0, help="wall budget of the whole script (8)")
    ap.add_argument("--parts", default="ref-bf16,ref-fp32,48b-bf16,48b-fp32")
    ap.add_argument("--prompts", type=int, default=16, help="prompts per part (16)")
    ap.add_argument("--arms", default="fp16,bf16", help="state formats against fp32 (fp16,bf16)")
    ap.add_argument("--ref-model", help="reference model checkpoint dir (default: evalkit's embedded one)")
    ap.add_argument("--ref-length", type=int, default=131072)
    ap.add_argument("--ref-chunk", type=int, default=2048)
    ap.add_argument("--length-48b", type=int, default=131072)
    ap.add_argument("--chunk-48b", type=int, default=4096)
    ap.add_argument("--layers-48b", type=int, default=27, help="layers of the bf16 48B-dims model (27 = all)")
    ap.add_argument(
        "--layers-48b-fp32", type=int, default=4, help="layers of the fp32 48B-dims model (4: 3 KDA + 1 MLA)"
    )
    ap.add_argument("--decode-block", type=int, default=1024, help="decode mode: tokens per lockstep block")
    ap.add_argument("--no-fused-decode", dest="fused_decode", action="store_false")
    ap.add_argument(
        "--mla-prefill",
        choices=["auto", "flash", "sdpa", "triton"],
        help="MLA prefill attention (KernelChoice.mla_prefill; default auto: triton in 16-bit, sdpa in fp32, "
        "measured at 128k, one layer, SDPA 5.03 s vs triton (tf32x3) 8.66 s "
        "(results/bench/mla-prefill-triton-h200)",
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="CPU check: tiny widths instead of 48B dims")
    ap.add_argument(
        "--estimate", action="store_true", help="print the plan and its estimated seconds; run nothing"
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue the parts' studies in --out/runs/<part>/ (a study longer than one GPU session: "
        "copy that folder back into --out first); finished prompts are not run again",
    )
    ap.add_argument(
        "--allow-source-change",
        action="store_true",
        help="with --resume: continue studies made by other evalkit code (recorded in each manifest)",
    )
    args = ap.parse_args()
    bootstrap_evalkit()
    from evalkit.drift.campaign import estimate_seconds, note_markdown, run_part
    from evalkit.kernel_choice import KernelChoice

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    parts = plan(args)
    est = {p.name: estimate_seconds(p, arms) for p in parts}
    for p in parts:
        e = est[p.name]
        log(
            f"plan {p.name}: {p.n_prompts} prompts x {p.length} tokens, estimated "
            f"prefill {e['prefill']:.0f} s, decode {e['decode']:.0f} s, total {e['total']:.0f} s on an H200"
        )
    total_est = sum(e["total"] for e in est.values())
    log(f"estimated total {total_est:.0f} s against a budget of {args.max_minutes * 60:.0f} s")
    usable = args.max_minutes * 60 - 30
    if total_est > usable:
        log(
            f"WARNING: the budget covers about {100 * usable / total_est:.0f}% of the plan: "
            "each part gets its share and stops taking prompts when it is spent (fewer prompts than asked); "
            "shorten --ref-length / --length-48b, lower --prompts or run the parts one per command"
        )
    if args.estimate:
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_drift.py needs a CUDA GPU (or --device cpu --smoke for a check of the script)")
    import triton

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else (platform.processor() or "cpu")
    meta = {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "smoke": args.smoke,
        "command": "python scripts/gpu_drift.py " + " ".join(sys.argv[1:]),
        "estimated_total_s": total_est,
        "mla_prefill": args.mla_prefill or "auto",
    }
    log(f"{gpu}, torch {meta['torch']}, triton {meta['triton']}")
    meta["decode_kernel_check"] = kernel_check(args)
    ref_path = find_ref_model(args.ref_model)
    budget_left = harness.Budget(args.max_minutes * 60 - 20, CLOCK)  # keep 20 s for the note
    done: list[dict] = []
    for i, p in enumerate(parts):
        left = budget_left.left()
        budget = max(20.0, left * est[p.name]["total"] / sum(est[q.name]["total"] for q in parts[i:]))
        log(f"part {p.name}: budget {budget:.0f} s")
        rec = run_part(
            p,
            out,
            budget,
            arms=arms,
            device=args.device,
            ref_path=ref_path,
            smoke=args.smoke,
            fused_decode=args.fused_decode,
            decode_block=args.decode_block,
            command=meta["command"].split(),
            log=log,
            resume=args.resume,
            allow_source_change=args.allow_source_change,
            kernels=KernelChoice(mla_prefill=args.mla_prefill or "auto"),
        )
        log(f"{p.name}: {rec['seconds']} s, peak {rec['peak_gpu_memory_gib']} GiB, ok {rec.get('ok')}")
        done.append(rec)
        meta["wall_s"] = CLOCK.elapsed()
        (out / "summary.json").write_text(json.dumps({"meta": meta, "parts": done}, indent=1, default=str))
        (out / "note.md").write_text(note_markdown(done, meta))
    log(f"wrote {out}: {sorted(x.name for x in out.iterdir() if x.is_file())}")
    return 0 if done and all(r.get("ok") for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
