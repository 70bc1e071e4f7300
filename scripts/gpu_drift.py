#!/usr/bin/env python3
"""H200 drift study: how the error of an fp16 / bf16 recurrent state grows with length.

Two parts, each bounded by its share of --max-minutes and wrapped so that one failure keeps the
other (errors land in summary.json):
  ref  the reference model (--ref-model, else evalkit's embedded one if present): teacher-forced
       prefill and decode modes to --ref-length (64k) on a long-context task prompt (--ref-task),
       plus --ref-generate greedy tokens;
  48b  random weights at Kimi-Linear-48B-A3B dimensions, all 27 layers (20 KDA, 7 MLA, MoE
       256x8, vocab 163840), built on the GPU once: prefill mode to --length-48b (128k, chunk
       --chunk-48b 4096) plus --generate-48b greedy tokens, then decode mode to --decode-length
       (64k).
fp16 and bf16 arms run in lockstep with an fp32 arm on the same tokens, chunk by chunk; metrics
are computed on the fly and dropped (never [L, vocab] logits for all positions).

Decode mode rounds the state after every token. One engine step per token would need ~20 min for
64k tokens x 3 arms at full depth, so each block of teacher-forced tokens runs as one batched
forward whose KDA layers step their recurrence token by token inside one Triton launch
(`evalkit.drift.recurrent_rounding`). It is checked against the engine's decode kernel at
start-up; if the check fails the script falls back to one `kda_decode` launch per token.

Run (repository root, on the lent H200; bounded by --max-minutes, default 6):
    python scripts/gpu_drift.py --out $OUT/drift --max-minutes 6 [--ref-model PATH]
evalkit need not be pip-installed: the script maps kernels/ and tasks/ into the evalkit namespace
itself when `import evalkit.kernels` fails. CPU check of the script (tiny widths, not a result):
    python scripts/gpu_drift.py --out /tmp/gd --device cpu --smoke --ref-model CKPT --ref-length 512 \
        --ref-chunk 64 --length-48b 512 --chunk-48b 128 --decode-length 256 --generate-48b 16

Writes to --out (8 files at the top): summary.json, note.md, ref_kl.png, ref_state.png,
48b_prefill_kl.png, 48b_prefill_state.png, 48b_decode_kl.png, 48b_decode_state.png; each run's
full directory (manifest, buckets.csv/json, states.csv/json, summary.json/md, plots) under runs/.
"""

from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def bootstrap_evalkit() -> None:
    """Import evalkit from this checkout, mapping kernels/ and tasks/ as setup.py does."""
    try:
        import evalkit.kernels  # noqa: F401
        import evalkit.tasks  # noqa: F401

        return
    except ImportError:
        pass
    sys.path.insert(0, str(REPO))
    import evalkit

    for name, folder in (("evalkit.kernels", "kernels"), ("evalkit.tasks", "tasks")):
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(
            name, REPO / folder / "__init__.py", submodule_search_locations=[str(REPO / folder)]
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        setattr(evalkit, name.split(".")[1], mod)
    log("evalkit imported from the checkout (kernels/ and tasks/ mapped into the namespace)")


def kimi_48b_raw(num_layers: int = 27, smoke: bool = False) -> dict:
    """Kimi-Linear-48B-A3B's config cut to its first layers (`kimi_linear_48b_config`); `smoke`
    shrinks every width, keeping the layer pattern (a CPU check of this script, not a measurement)."""
    from evalkit.model import kimi_linear_48b_config

    real = kimi_linear_48b_config(num_layers)
    if smoke:
        layers = real["linear_attn_config"]
        return {
            "model_type": "kimi_linear",
            "vocab_size": 512,
            "hidden_size": 64,
            "num_hidden_layers": num_layers,
            "intermediate_size": 128,
            "moe_intermediate_size": 32,
            "num_experts": 4,
            "num_experts_per_token": 2,
            "num_attention_heads": 2,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 16,
            "v_head_dim": 16,
            "linear_attn_config": {
                "full_attn_layers": layers["full_attn_layers"],
                "kda_layers": layers["kda_layers"],
                "num_heads": 2,
                "head_dim": 32,
                "short_conv_kernel_size": 4,
            },
        }
    return real


def random_48b(args, num_layers: int, seed: int = 0):
    import torch

    from evalkit.model import parse_config, random_model

    arch = parse_config(
        kimi_48b_raw(num_layers, args.smoke), source=f"Kimi-Linear-48B dims, {num_layers} layers"
    )
    t = time.time()
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    lm = random_model(arch, args.device, dtype, seed=seed)
    n = sum(p.numel() for p in lm.parameters())
    log(
        f"random {num_layers}-layer model at 48B dims: {n / 1e9:.2f} B params built in {time.time() - t:.1f}s"
    )
    return lm, n


def find_ref_model(arg: str | None) -> str | None:
    if arg:
        return arg if Path(arg).exists() else None
    try:
        from evalkit import reference_model

        return str(reference_model.default_model_path())
    except Exception:  # noqa: BLE001 - the part is simply skipped
        return None


def run_part(name: str, out: Path, budget_s: float, body) -> dict:
    """Run one part with its budget; never raise."""
    import torch

    cuda = torch.cuda.is_available()
    rec: dict = {"part": name, "budget_s": round(budget_s, 1)}
    t = time.time()
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        rec.update(body(out / "runs", budget_s))
        rec["ok"] = True
    except Exception as exc:  # noqa: BLE001 - record and go on
        rec["ok"] = False
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["traceback"] = traceback.format_exc()
        log(f"{name} FAILED: {rec['error']}")
    rec["seconds"] = round(time.time() - t, 1)
    rec["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None
    if cuda:
        torch.cuda.empty_cache()
    log(f"{name}: done in {rec['seconds']}s, peak {rec['peak_gpu_memory_gib']} GiB")
    return rec


def drift(model, ids, arms, modes, chunk, generate, prompt_len, run_dir, title, budgets, info, decode_block):
    import torch

    from evalkit.drift.driver import DriftConfig, run_drift

    cfg = DriftConfig(
        arms=arms,
        modes=modes,
        chunk_size=chunk,
        decode_block=decode_block,
        generate=generate,
        prompt_length=prompt_len,
        title=title,
        max_bytes=2 << 30,
    )
    t = time.time()
    s = run_drift(
        model,
        torch.tensor(ids),
        cfg,
        run_dir,
        input_info=info,
        overwrite=True,
        show_progress=False,
        budgets=budgets,
        command=["python", "scripts/gpu_drift.py", *sys.argv[1:]],
    )
    log(f"  {title}: drift run written to {run_dir} in {time.time() - t:.1f}s")
    return s


def brief(summary: dict) -> dict:
    from evalkit.drift.report import drift_brief

    return drift_brief(summary)


def copy_plots(run_dir: Path, out: Path, prefix: str) -> list[str]:
    done = []
    for src, dst in (("kl.png", f"{prefix}_kl.png"), ("state.png", f"{prefix}_state.png")):
        if (run_dir / src).is_file():
            shutil.copy(run_dir / src, out / dst)
            done.append(dst)
    return done


# ---------------------------------------------------------------------------------------------
def kernel_check(args) -> dict:
    """Drift's one-launch decode kernel against the engine's decode kernel at real dims."""
    import torch

    if not torch.cuda.is_available() or not args.fused_decode:
        return {
            "skipped": True,
            "fused_decode": False if not torch.cuda.is_available() else args.fused_decode,
        }
    try:
        from evalkit.drift.recurrent_rounding import check_against_decode_loop

        rep = check_against_decode_loop(H=32, K=128, V=128, T=256, device="cuda")
    except Exception as exc:  # noqa: BLE001
        rep = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    if not rep.get("ok"):
        args.fused_decode = False
        log(f"decode kernel check FAILED ({rep}); decode mode falls back to one kda_decode launch per token")
    else:
        log(
            "decode kernel check passed: "
            + ", ".join(
                f"{d}: state vs loop {rep[d]['state_vs_loop']:.2e} (effect {rep[d]['effect']:.2e}, "
                f"bit-identical {rep[d]['bit_identical']})"
                for d in ("fp32", "fp16", "bf16")
            )
        )
    rep["fused_decode"] = args.fused_decode
    return rep


def part_ref(args, out_root: Path):
    def body(run_dir: Path, budget: float) -> dict:
        from evalkit.drift import inputs
        from evalkit.drift.engine_adapter import EngineDriftModel

        t = time.time()
        path = find_ref_model(args.ref_model)
        if path is None:
            raise FileNotFoundError("no reference model (pass --ref-model PATH)")
        L = args.ref_length
        model = EngineDriftModel.load(
            path,
            device=args.device,
            max_len=L + args.ref_generate + 8,
            chunk_size=args.ref_chunk,
            fused_decode=args.fused_decode,
        )
        log(f"reference model {path}: {model.describe()}")
        try:
            ids, info = inputs.task_prompt(args.ref_task, model.tokenizer, model.tokenize, L, 0)
            ids = ids[:L]
        except Exception as exc:  # noqa: BLE001 - a task problem must not lose the part
            log(f"  task prompt failed ({exc}); using random token ids")
            ids, info = inputs.random_ids(model.vocab_size, L, 0)
        log(f"  input: {info['source']}, {len(ids)} tokens")
        left = budget - (time.time() - t)
        s = drift(
            model,
            ids,
            ["fp16", "bf16"],
            ["prefill", "decode"],
            args.ref_chunk,
            args.ref_generate,
            min(args.prompt_length, len(ids)),
            run_dir / "ref",
            "reference model",
            {"prefill": 0.25 * left, "decode": 0.5 * left, "generate": 0.15 * left},
            info,
            args.decode_block,
        )
        return {
            "model": model.describe(),
            "input": {**info, "length": len(ids)},
            "results": brief(s),
            "plots": copy_plots(run_dir / "ref", out_root, "ref"),
        }

    return body


def part_48b(args, out_root: Path):
    def body(run_dir: Path, budget: float) -> dict:
        from evalkit.drift import inputs
        from evalkit.drift.engine_adapter import EngineDriftModel

        t = time.time()
        lm, n_params = random_48b(args, args.layers_48b, seed=0)
        a = lm.arch
        desc = {
            "params": n_params,
            "layers": a.num_hidden_layers,
            "kda_layers": len(a.kda_layers),
            "mla_layers": len(a.mla_layers),
            "vocab_size": a.vocab_size,
            "hidden_size": a.hidden_size,
        }
        L, Ld = args.length_48b, args.decode_length
        model = EngineDriftModel(
            lm,
            None,
            max_len=max(L + args.generate_48b, Ld) + 8,
            chunk_size=args.chunk_48b,
            fused_decode=args.fused_decode,
            info={
                "path": f"random weights, Kimi-Linear-48B-A3B dims, {a.num_hidden_layers} layers",
                "params": n_params,
            },
        )
        ids, info = inputs.random_ids(a.vocab_size, max(L, Ld), 0)
        left = budget - (time.time() - t)
        pre = drift(
            model,
            ids[:L],
            ["fp16", "bf16"],
            ["prefill"],
            args.chunk_48b,
            args.generate_48b,
            args.prompt_length,
            run_dir / "48b_prefill",
            f"random 48B dims, prefill to {L}",
            {"prefill": 0.33 * left, "generate": 0.12 * left},
            info,
            args.decode_block,
        )
        plots = copy_plots(run_dir / "48b_prefill", out_root, "48b_prefill")
        left = budget - (time.time() - t)
        dec = drift(
            model,
            ids[:Ld],
            ["fp16", "bf16"],
            ["decode"],
            args.chunk_48b,
            0,
            args.prompt_length,
            run_dir / "48b_decode",
            f"random 48B dims, decode to {Ld}",
            {"decode": 0.9 * left},
            info,
            args.decode_block,
        )
        plots += copy_plots(run_dir / "48b_decode", out_root, "48b_decode")
        del model, lm
        return {"model": desc, "input": info, "results": {**brief(pre), **brief(dec)}, "plots": plots}

    return body


# ---------------------------------------------------------------------------------------------
def fmt(x, spec=".3g"):
    return "–" if x is None else format(x, spec)


def note(parts: list[dict], meta: dict) -> str:
    lines = [
        f"# Drift of a 16-bit KDA state with sequence length ({meta['gpu']})",
        "",
        f"Machine: {meta['gpu']}; torch {meta['torch']}, triton {meta['triton']}. "
        f"Command: `{meta['command']}` ({meta['wall_s']:.0f} s wall). fp16 and bf16 state arms against an "
        "fp32 state arm on the same tokens, compute fp32 everywhere; teacher-forced `prefill` (state rounded "
        "once per chunk) and `decode` (rounded after every token), metrics per position on the fly.",
        "",
    ]
    if meta.get("smoke"):
        lines += ["**SMOKE RUN: tiny widths on CPU, a check of the script, not a measurement.**", ""]
    kc = meta.get("decode_kernel_check") or {}
    if not kc.get("skipped"):
        lines += [
            "Decode mode ran "
            + ("drift's one-launch kernel" if kc.get("fused_decode") else "one `kda_decode` launch per token")
            + "; start-up check against the decode kernel (T=256, H=32, K=V=128): "
            + ", ".join(
                f"{d} state {kc[d]['state_vs_loop']:.1e} vs effect {kc[d]['effect']:.1e}"
                for d in ("fp32", "fp16", "bf16")
                if d in kc
            )
            + f" ({'passed' if kc.get('ok') else 'FAILED: ' + str(kc.get('error', ''))}).",
            "",
        ]
    lines += [
        "| part | mode | tokens | arm | mean KL | p99 KL | top-1 agree "
        "| state rel. err (end, mean of layers) | max \\|state\\| | KL trend | state-error trend "
        "| arm tok/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in parts:
        if not p.get("ok"):
            lines.append(f"| {p['part']} | failed: {p.get('error', '?')} |||||||||||")
            continue
        for mode, r in p["results"].items():
            if mode == "free_running":
                continue
            n = f"{r['length']}" + (f" of {r['requested_length']} (budget)" if r["stopped_early"] else "")
            for arm, a in r["arms"].items():
                g, gs = a["growth"]["kl"], a["growth"].get("state_rel_fro", {})
                trend = (
                    g["verdict"]
                    if g["slope"] is None
                    else f"{g['verdict']} L^{g['slope']:.2f} [{g['ci_low']:.2f}, {g['ci_high']:.2f}]"
                )
                strend = (
                    gs.get("verdict", "–")
                    if gs.get("slope") is None
                    else f"{gs['verdict']} L^{gs['slope']:.2f}"
                )
                lines.append(
                    f"| {p['part']} | {mode} | {n} | {arm} | {fmt(a['mean_kl'])} | {fmt(a['p99_kl'])} "
                    f"| {fmt(None if a['top1_agreement'] is None else 100 * a['top1_agreement'], '.2f')}% "
                    f"| {fmt(a['state_rel_err_end_mean'])} | {fmt(a['state_max_abs'])} | {trend} | {strend} "
                    f"| {fmt(a['tokens_per_second'], '.0f')} |"
                )
    lines.append("")
    lines.append("## What they show")
    lines.append("")
    for p in parts:
        if not p.get("ok"):
            continue
        res = p["results"]
        for mode in ("prefill", "decode"):
            if mode not in res:
                continue
            a16, ab = res[mode]["arms"].get("fp16"), res[mode]["arms"].get("bf16")
            if a16 and ab and a16["mean_kl"] and ab["mean_kl"]:
                lines.append(
                    f"- {p['part']}, {mode} to {res[mode]['length']} tokens: bf16's mean KL is "
                    f"{ab['mean_kl'] / a16['mean_kl']:.0f}x fp16's "
                    f"({fmt(ab['mean_kl'])} vs {fmt(a16['mean_kl'])}); "
                    f"{a16['growth']['kl']['text']} (fp16); {ab['growth']['kl']['text']} (bf16)."
                )
        if "prefill" in res and "decode" in res:
            for arm in ("fp16", "bf16"):
                pe = res["prefill"]["arms"][arm]["state_rel_err_end_mean"]
                de = res["decode"]["arms"][arm]["state_rel_err_end_mean"]
                if pe and de:
                    lines.append(
                        f"- {p['part']}, {arm}: decode mode ends with {de / pe:.1f}x the state error of "
                        f"prefill mode ({fmt(de)} vs {fmt(pe)}): rounding every token vs once per chunk."
                    )
        for mode in ("prefill", "decode"):
            for arm, a in res.get(mode, {}).get("arms", {}).items():
                if a["nonfinite"] or a["state_n_over_fp16"]:
                    lines.append(
                        f"- {p['part']}, {mode}, {arm}: {a['nonfinite']} non-finite values, "
                        f"{a['state_n_over_fp16']} state values at or past 65504."
                    )
        fr = res.get("free_running")
        if fr:
            bits = []
            for arm, a in fr["arms"].items():
                div = (
                    "never diverged"
                    if a["first_divergence"] is None
                    else f"first diverged at token {a['first_divergence']}"
                )
                bits.append(f"{arm} {div} (flags: {', '.join(a['flags']) or 'none'})")
            lines.append(
                f"- {p['part']}, free running {fr['n_tokens']} greedy tokens: "
                + "; ".join(bits)
                + f"; fp32 flags: {', '.join(fr['fp32_flags']) or 'none'}."
            )
    lines.append("")
    lines.append("## Costs")
    lines.append("")
    for p in parts:
        lines.append(
            f"- {p['part']}: {p['seconds']} s of a {p['budget_s']} s budget, peak GPU memory "
            f"{p['peak_gpu_memory_gib']} GiB" + ("" if p.get("ok") else f" — FAILED: {p.get('error')}")
        )
        for mode, r in (p.get("results") or {}).items():
            if mode != "free_running":
                lines.append(
                    f"  - {mode}: {r['length']} tokens, {r['wall_seconds']:.1f} s wall for fp32 + 2 arms "
                    f"(fp32 arm alone {r['seconds_fp32_arm']:.1f} s)"
                )
    lines.append("")
    lines.append(
        "Random-weight models read uniform random token ids; the reference model reads a task prompt. "
        "Per-part run directories (CSV/JSON per log-spaced bucket, states per layer, summary.md) are under "
        "`runs/`. Decode mode runs each block of teacher-forced tokens as one batched forward whose KDA "
        "layers round their state after every token (the kernel check above); a run that hit its time "
        "budget says how far it got (`tokens` column)."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-minutes", type=float, default=6.0, help="wall budget of the whole script (6)")
    ap.add_argument("--ref-model", help="reference model checkpoint dir (default: evalkit's embedded one)")
    ap.add_argument("--ref-task", default="kv_retrieval", help="task whose prompt the reference model reads")
    ap.add_argument("--ref-length", type=int, default=65536)
    ap.add_argument("--ref-chunk", type=int, default=2048)
    ap.add_argument("--ref-generate", type=int, default=1024)
    ap.add_argument("--length-48b", type=int, default=131072, help="48B prefill-mode length (131072)")
    ap.add_argument("--chunk-48b", type=int, default=4096)
    ap.add_argument("--generate-48b", type=int, default=128)
    ap.add_argument("--layers-48b", type=int, default=27, help="layers of the 48B-dims model (27 = all)")
    ap.add_argument("--decode-length", type=int, default=65536, help="48B decode-mode length (65536)")
    ap.add_argument("--decode-block", type=int, default=1024, help="decode mode: tokens per lockstep block")
    ap.add_argument(
        "--no-fused-decode",
        dest="fused_decode",
        action="store_false",
        help="decode mode: one kda_decode launch per token (slow) instead of drift's kernel",
    )
    ap.add_argument("--prompt-length", type=int, default=1024, help="free running: prompt tokens (1024)")
    ap.add_argument("--parts", default="ref,48b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CPU check of this script: tiny widths instead of 48B dims (not a measurement)",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bootstrap_evalkit()
    import torch
    import triton

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_drift.py needs a CUDA GPU (or --device cpu --smoke for a check of the script)")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else (platform.processor() or "cpu")
    meta = {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "smoke": args.smoke,
        "command": "python scripts/gpu_drift.py " + " ".join(sys.argv[1:]),
    }
    log(f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}")
    meta["decode_kernel_check"] = kernel_check(args)
    total = args.max_minutes * 60 - (time.time() - T0) - 15  # keep 15 s for the note
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    shares = {"ref": 0.3, "48b": 0.7}
    unknown = [p for p in wanted if p not in shares]
    if unknown:
        raise SystemExit(f"unknown --parts {unknown}; known: {', '.join(shares)}")
    if "ref" in wanted and find_ref_model(args.ref_model) is None:
        log("no reference model found: part 'ref' skipped (pass --ref-model PATH)")
        wanted.remove("ref")
        meta["ref_skipped"] = "no reference model found"
    makers = {"ref": part_ref, "48b": part_48b}
    parts = []
    start = time.time()
    for i, name in enumerate(wanted):
        left = total - (time.time() - start)
        budget = max(30.0, left * shares[name] / sum(shares[p] for p in wanted[i:]))
        log(f"part {name}: budget {budget:.0f} s")
        parts.append(run_part(name, out, budget, makers[name](args, out)))
        (out / "summary.json").write_text(json.dumps({"meta": meta, "parts": parts}, indent=1, default=str))
    meta["wall_s"] = time.time() - T0
    (out / "summary.json").write_text(json.dumps({"meta": meta, "parts": parts}, indent=1, default=str))
    (out / "note.md").write_text(note(parts, meta))
    top = sorted(p.name for p in out.iterdir() if p.is_file())
    log(f"wrote {out}: {len(top)} files at the top: {top}")
    return 0 if parts and all(p.get("ok") for p in parts) else 1


if __name__ == "__main__":
    sys.exit(main())
