"""The GPU drift campaign behind `scripts/gpu_drift.py`: studies over models × weight dtypes.

A part is one model in one weights dtype: the shipped reference model (`ref`) or random weights
at Kimi-Linear-48B dimensions (`48b`), with bf16 or fp32 weights and activations (fp32 removes the
bf16 activation floor; at 48B dims fp32 weights run with fewer layers, `layers`, for their cost). Each
part is a `study.run_study` over N prompts in prefill and decode modes with the A/A floor and the
sensitivity rows, bounded by its share of the wall budget; every prompt finished is on disk.

`estimate_seconds` predicts a part's cost from the per-session throughputs measured on an H200 in
results/drift (h200-ref: reference model, bf16 weights; h200: 27-layer 48B dims), so the lead can
size a run before starting it; the note records estimate against actual.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalkit.drift.modes import MODES

# tokens/s of one session (one arm) on one H200, teacher-forced. ref: from results/drift/h200*/
# note.md (a pessimistic 88k / 26k; the 128k studies ran at ~160k / ~85k). 48B dims, 27 layers,
# bf16 weights: measured in results/drift/h200-48b-bf16w-128k (52.5 s per 128k prompt in prefill
# mode, 104 s in decode mode, 4 sessions each, per-prompt overhead included).
THROUGHPUT = {
    ("ref", "prefill"): 88_000,
    ("ref", "decode"): 26_000,
    ("48b", "prefill"): 10_000,
    ("48b", "decode"): 5_050,
}
# fp32 weights at 48B dims against bf16, per layer: from the first 48b-fp32 call (2026-12-01, 4
# layers, --mla-prefill triton; its output was lost with that session's machine, the log gave
# ~67 s per 128k prompt of prefill over 5 prompts and ~108 s for one decode prompt). The 2x
# guessed before predicted 15.6 s and 30.8 s: 4.3x and 3.5x too few.
FP32_48B_COST = {"prefill": 8.6, "decode": 7.0}
# per prompt and mode: sessions, metrics, rewriting the run directory (a guess: not measured yet)
PROMPT_OVERHEAD_S = {"ref": 0.5, "48b": 0.0}  # 48b: inside its measured throughput
# per part: loading or building the model, first compiles, plots (h200-ref: 8.6 s to load, ~10 s
# of plots and writes; h200: the 27-layer random model built in 0.1 s)
PART_OVERHEAD_S = {"ref": 20.0, "48b": 20.0}


@dataclass
class Part:
    kind: str  # "ref" | "48b"
    weights: str  # "bf16" | "fp32"
    length: int
    n_prompts: int
    chunk_size: int
    layers: int | None = None  # 48b only

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.weights}-weights"


def sessions(arms: list[str], floor: bool = True) -> int:
    """Sessions per prompt: the fp32 reference, each arm, the A/A arm."""
    return 1 + len(arms) + (1 if floor else 0)


def estimate_seconds(part: Part, arms: list[str], modes=MODES) -> dict[str, float]:
    """Predicted seconds per mode and in all. fp32-weight 48B parts are scaled by their layer share
    and by FP32_48B_COST per mode."""
    out = {}
    for mode in modes:
        scale = 1.0
        if part.kind == "48b" and part.layers:
            scale = part.layers / 27 * (FP32_48B_COST[mode] if part.weights == "fp32" else 1.0)
        per_prompt = sessions(arms) * part.length / THROUGHPUT[(part.kind, mode)] * scale
        out[mode] = part.n_prompts * (per_prompt + PROMPT_OVERHEAD_S[part.kind])
    out["total"] = sum(out.values()) + PART_OVERHEAD_S[part.kind]
    return out


def kimi_48b_raw(num_layers: int = 27, smoke: bool = False) -> dict:
    """Kimi-Linear-48B-A3B's config cut to its first layers; `smoke` shrinks every width (a CPU
    check of the campaign, not a measurement)."""
    from evalkit.model import kimi_linear_48b_config

    real = kimi_linear_48b_config(num_layers)
    if not smoke:
        return real
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


def _dtype(weights: str):
    import torch

    return {"bf16": torch.bfloat16, "fp32": torch.float32}[weights]


def build_model(
    part: Part, *, device: str, ref_path: str | None, smoke: bool, fused_decode: bool, log, kernels=None
):
    """(DriftModel, prompts) for a part (`kernels`: its `KernelChoice`, default every default)."""
    from evalkit.backends.local_probe import EngineDriftModel
    from evalkit.drift import prompts as P

    L = part.length
    if part.kind == "ref":
        if ref_path is None:
            raise FileNotFoundError("no reference model (pass --ref-model PATH)")
        model = EngineDriftModel.load(
            ref_path,
            device=device,
            dtype=_dtype(part.weights),
            max_len=L + 8,
            chunk_size=part.chunk_size,
            fused_decode=fused_decode,
            kernels=kernels,
        )
        try:
            prompts = P.task_prompts("kv_retrieval", model.tokenizer, model.tokenize, L, part.n_prompts, 0)
        except Exception as exc:  # noqa: BLE001 - a task problem must not lose the part
            log(f"  task prompts failed ({exc}); using random token ids")
            prompts = P.random_prompts(model.vocab_size, L, part.n_prompts, 0)
        return model, P.common_length(prompts)
    from evalkit.model import parse_config, random_model

    layers = part.layers or 27
    arch = parse_config(kimi_48b_raw(layers, smoke), source=f"Kimi-Linear-48B dims, {layers} layers")
    lm = random_model(arch, device, _dtype(part.weights), seed=0)
    n = sum(p.numel() for p in lm.parameters())
    # the same seed must give the same weights for a study resumed on another machine: checked
    checksum = sum(float(p.detach().flatten()[:4096].double().sum()) for p in lm.parameters())
    log(f"  random {layers}-layer model at 48B dims, {part.weights} weights: {n / 1e9:.2f} B params")
    model = EngineDriftModel(
        lm,
        None,
        max_len=L + 8,
        chunk_size=part.chunk_size,
        fused_decode=fused_decode,
        kernels=kernels,
        info={
            "path": f"random weights, Kimi-Linear-48B-A3B dims, {layers} layers",
            "params": n,
            "weights_checksum": checksum,
        },
    )
    return model, P.random_prompts(model.vocab_size, L, part.n_prompts, 0)


def run_part(
    part: Part,
    out: Path,
    budget_s: float,
    *,
    arms: list[str],
    device: str,
    ref_path: str | None,
    smoke: bool,
    fused_decode: bool,
    decode_block: int,
    command: list[str],
    log,
    resume: bool = False,
    kernels=None,
    allow_source_change: bool = False,
) -> dict[str, Any]:
    """Run one part within `budget_s`; never raise (a failure is recorded). `resume` continues the
    part's run directory under `out` (a study longer than one GPU session)."""
    import torch

    from evalkit.drift.study import StudyConfig, run_study
    from evalkit.drift.study_report import study_brief

    cuda = torch.cuda.is_available() and device.startswith("cuda")
    rec: dict[str, Any] = {"part": part.name, **asdict(part), "budget_s": round(budget_s, 1)}
    rec["estimate_s"] = estimate_seconds(part, arms)
    t0 = time.time()
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        model, prompts = build_model(
            part,
            device=device,
            ref_path=ref_path,
            smoke=smoke,
            fused_decode=fused_decode,
            log=log,
            kernels=kernels,
        )
        rec["prompt_length"] = len(prompts[0].ids)
        left = budget_s - (time.time() - t0)
        est = rec["estimate_s"]
        share = est["prefill"] / (est["prefill"] + est["decode"])
        cfg = StudyConfig(
            arms=arms,
            chunk_size=part.chunk_size,
            decode_block=decode_block,
            max_bytes=2 << 30,
            title=f"{part.name}, {len(prompts)} prompts of {len(prompts[0].ids)} tokens",
        )
        s = run_study(
            model,
            prompts,
            cfg,
            out / "runs" / part.name,
            command=command,
            overwrite=not resume,
            resume=resume,
            allow_source_change=allow_source_change,
            show_progress=False,
            # a fresh part splits its time by the modes' estimates; a resumed one gives what is
            # left to whatever its stored rows have not finished
            budgets=None if resume else {"prefill": share * left, "decode": (1 - share) * left},
            deadline=time.perf_counter() + left if resume else None,
            on_prompt=lambda mode, i: log(f"  {part.name} {mode}: prompt {i + 1}/{len(prompts)} done"),
        )
        rec["results"] = study_brief(s)
        rec["ok"] = not s.get("errors")
        if s.get("errors"):
            rec["error"] = "; ".join(e["error"] for e in s["errors"])
        del model
    except Exception as exc:  # noqa: BLE001 - record and go on to the next part
        import traceback

        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        log(f"{part.name} FAILED: {rec['error']}")
    rec["seconds"] = round(time.time() - t0, 1)
    rec["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None
    if cuda:
        torch.cuda.empty_cache()
    return rec


def note_markdown(parts: list[dict], meta: dict) -> str:
    """The campaign's note: verdicts per part, costs against estimates."""
    lines = [
        f"# Drift studies across prompts ({meta['gpu']})",
        "",
        f"Command: `{meta['command']}` ({meta.get('wall_s', 0):.0f} s wall; torch {meta['torch']}). "
        "Each part: N prompts × prefill and decode modes, fp32 reference arm, the arms under test and "
        "the A/A floor (fp32 computed with other chunk/block cuts); every figure across prompts "
        "(mean, 95% t-CI); growth exponents fitted per prompt with sensitivity rows. "
        "Full run directories under `runs/<part>/`.",
        "",
    ]
    if meta.get("refit"):
        lines += [f"Refitted: {meta['refit']}", ""]
    if meta.get("smoke"):
        lines += ["**SMOKE RUN: tiny widths on CPU, a check of the script, not a measurement.**", ""]
    for p in parts:
        lines.append(f"## {p['part']}")
        lines.append("")
        if not p.get("ok") and not p.get("results"):
            lines += [f"FAILED: {p.get('error')}", ""]
            continue
        r = p["results"]
        for v in r.get("verdicts") or []:
            lines.append(f"- **{v['arm']}**, {v['text']}")
            lines += [f"  - CAVEAT: {c}." for c in v["caveats"]]
        lines.append("")
        for mode in MODES:
            if mode in r:
                m = r[mode]
                lines.append(
                    f"- {mode}: {m['n_prompts']} of {p['n_prompts']} prompts of {m['length']} tokens"
                    + (" (stopped by budget)" if m["stopped_by_budget"] else "")
                    + f", {m['seconds_per_prompt'] or 0:.1f} s per prompt"
                )
        est = p.get("estimate_s", {})
        lines.append(
            f"- cost: {p['seconds']} s of a {p['budget_s']} s budget (estimated "
            f"{est.get('total', 0):.0f} s for all prompts), peak GPU memory {p['peak_gpu_memory_gib']} GiB"
            + ("" if p.get("ok") else f" — errors: {p.get('error')}")
        )
        lines.append("")
    return "\n".join(lines) + "\n"


def refit_campaign(folder: Path, how: str) -> dict:
    """Refit every part of a campaign folder (`gpu_drift.py --out`) from its measured rows
    (`evalkit.drift.refit`) and rewrite its summary.json and note.md; `how` says by what and when.
    Costs, budgets and commands stay those of the runs."""
    import json

    from evalkit.drift.refit import refit_study
    from evalkit.drift.rows import has_rows
    from evalkit.drift.study_report import study_brief

    body = json.loads((folder / "summary.json").read_text())
    for part in body["parts"]:
        run = folder / "runs" / part["part"]
        if has_rows(run):
            part["results"] = study_brief(refit_study(run))
    body["meta"]["refit"] = how
    (folder / "summary.json").write_text(json.dumps(body, indent=1, default=str))
    (folder / "note.md").write_text(note_markdown(body["parts"], body["meta"]))
    return body
