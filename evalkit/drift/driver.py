"""What every drift run shares: its manifest, error records, progress bars, and the free-running
phase (each arm greedily generates from the first prompt). `study.run_study` is the driver."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evalkit.backends.probe import DriftModel
from evalkit.drift import rundir
from evalkit.drift.generate import compare_generations, generate_greedy
from evalkit.store.manifest import base_manifest, now_utc


def tokens_sha256(tokens: torch.Tensor) -> str:
    return hashlib.sha256(tokens.to(torch.long).cpu().numpy().tobytes()).hexdigest()


def manifest(model: DriftModel, drift: dict[str, Any], command: list[str] | None) -> dict:
    """The run store's manifest (`store.manifest.base_manifest`), plus the model and drift's configuration."""
    command = list(command) if command else ["evalkit", "drift", *sys.argv[1:]]
    m = dict(base_manifest(command))
    m["kind"] = "drift"
    m["model"] = model.describe()
    if "kernels" in m["model"]:  # identity, as a run's (`store.manifest.identity_fields`)
        m["kernels"] = m["model"]["kernels"]
    m["drift"] = drift
    m["started_at"] = m.get("started_at") or now_utc()
    return m


def free_running(
    model: DriftModel,
    tokens: torch.Tensor,
    arms: list[str],
    *,
    generate: int,
    prompt_length: int,
    chunk_size: int,
    out: Path,
    summary: dict,
    show_progress: bool,
    budget: float | None,
) -> None:
    """Greedy `generate` tokens per arm (fp32 first) from the first `prompt_length` tokens;
    the comparison goes to summary["free_running"] and free_running.json."""
    prompt = tokens[: max(1, min(prompt_length, tokens.numel()))]
    gens = {}
    per_arm = budget / (1 + len(arms)) if budget is not None else None
    for arm in ["fp32", *arms]:
        bar = progress_bar(show_progress, generate, f"generate {arm}")
        stop = time.perf_counter() + per_arm if per_arm is not None else None
        try:
            gens[arm] = generate_greedy(
                model,
                prompt,
                arm,
                generate,
                chunk_size=chunk_size,
                progress=bar.update if bar else None,
                deadline=stop,
            )
        finally:
            if bar:
                bar.close()
    ref = gens["fp32"]
    fr_arms = {arm: compare_generations(ref, gens[arm]) for arm in arms}
    summary["free_running"] = {
        "prompt_tokens": int(prompt.numel()),
        "n_tokens": generate,
        "reference": compare_generations(ref, ref),
        "arms": fr_arms,
    }
    rundir.write_json(
        out / "free_running.json",
        {
            "prompt_tokens": int(prompt.numel()),
            "tokens": {arm: g.tokens for arm, g in gens.items()},
            "arms": fr_arms,
        },
    )


def record_error(summary: dict, phase: str, exc: BaseException) -> None:
    import traceback

    msg = f"{phase}: {type(exc).__name__}: {exc}"
    summary["errors"].append({"phase": phase, "error": msg, "traceback": traceback.format_exc()[-4000:]})
    print(f"evalkit drift: {msg} (recorded in summary.json; continuing)", file=sys.stderr, flush=True)


def progress_bar(show: bool, total: int, desc: str):
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="tok", leave=False, dynamic_ncols=True)
