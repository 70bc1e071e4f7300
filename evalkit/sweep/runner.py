"""Run every arm of a sweep with one loaded model, then summarise the run directories."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.arm import Arm
from evalkit.errors import InputError
from evalkit.kernel_choice import KernelChoice


@dataclass
class SweepSpec:
    arms: list[Arm]  # the first exact (fp32) arm is the baseline
    out_dir: Path
    model: str | None = None  # checkpoint; None: the embedded reference model and its suite
    tasks: list[str] | None = None
    lengths: list[int] | None = None
    limit: int | None = None
    seed: int | None = None
    data_dir: str | None = None
    max_new_tokens: int | None = None
    gold_logprob: bool = True
    margin: float = 0.05
    device: str | None = None
    max_num_seqs: int | None = None
    progress: bool = True
    command: list[str] = field(default_factory=list)
    kernels: KernelChoice = KernelChoice()  # every arm's numerics besides the state


def baseline_of(arms: list[Arm]) -> Arm:
    for a in arms:
        if a.is_baseline:
            return a
    raise InputError("--arms needs an fp32 arm: the baseline every other arm is compared with")


def prefill_budget(arms: list[Arm], device: str) -> int:
    """One prefill budget (rows per prefill forward) for every arm: the engine's GPU default or
    the CPU's `DEFAULT_PREFILL_CHUNK`, raised to the largest chunk size, so arms differ only in
    their stores, never in the shapes of their GEMMs."""
    from evalkit.arm import DEFAULT_PREFILL_CHUNK

    floor = DEFAULT_PREFILL_CHUNK if device == "cpu" else 16384
    return max([floor, *(a.prefill_chunk_size for a in arms)])


def oversized_chunk_note(arms: list[Arm], lengths: list[int] | None, device: str) -> str | None:
    """On the CPU every arm's prefill is padded to the largest chunk (`prefill_budget`); an arm
    whose chunk is far past every prompt makes the whole sweep pay for rows it never uses. The
    line names the chunk that stores at the same point (once, at the prompt's end) for less."""
    from evalkit.arm import DEFAULT_PREFILL_CHUNK

    if device != "cpu" or not lengths:
        return None
    big = max(arms, key=lambda a: a.prefill_chunk_size)
    fits = -(-max(lengths) // DEFAULT_PREFILL_CHUNK) * DEFAULT_PREFILL_CHUNK  # >= every prompt
    if big.prefill_chunk_size < 2 * fits:
        return None
    return (
        f"note: arm {big.label} pads every arm's prefill to {big.prefill_chunk_size:,} rows on the CPU; "
        f"the prompts are at most {max(lengths):,} tokens, so a chunk of {fits:,} also stores once, at "
        f"the prompt's end, at a fraction of the cost"
    )


def arm_dir(out_dir: Path, arm: Arm) -> Path:
    return Path(out_dir) / arm.label


def _log(msg: str) -> None:
    print(f"evalkit sweep: {msg}", file=sys.stderr, flush=True)


def run_sweep(spec: SweepSpec) -> dict[str, Any]:
    """Each arm into DIR/<label>/ (resumable), then `summarize_sweep`. Returns the summary."""
    from evalkit.model.loader import load_model
    from evalkit.runner import RunSpec, run_evaluation
    from evalkit.runner import setup as su

    baseline_of(spec.arms)
    model, suite = spec.model, None
    if model is None:
        model, suite = su.default_model()
    tasks = spec.tasks or (list(suite.tasks) if suite else ["gsm8k"])
    lengths = spec.lengths or (list(suite.lengths) if suite else None)
    limit = spec.limit if spec.limit is not None else (suite.limit if suite else None)
    seed = spec.seed if spec.seed is not None else (suite.seed if suite else None)
    device = spec.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    loaded = load_model(model, device=device, dtype=spec.kernels.torch_weight_dtype())
    _log(f"loaded {model} on {device} in {time.perf_counter() - t0:.1f} s")
    request_cache: dict[str, Any] = {}  # the questions are built once and asked of every arm,
    encode_cache: dict[str, Any] = {}  # and tokenized once
    budget = prefill_budget(spec.arms, device)
    note = oversized_chunk_note(spec.arms, lengths, device)
    if note:
        _log(note)
    for arm in spec.arms:
        setup = su.local_setup(
            model,
            arm,
            None,
            device,
            spec.max_num_seqs,
            loaded=loaded,
            prefill_budget=budget,
            encode_cache=encode_cache,
            kernels=spec.kernels,
        )
        manifest = su.base_manifest_fields(spec.command or ["evalkit", "sweep"])
        manifest.update(
            model=setup.model,
            arm=setup.arm,
            backend=setup.backend.describe(),
            seeds={"task_seed": seed},
            sweep={"dir": str(spec.out_dir)},
        )
        if setup.kernels is not None:
            manifest["kernels"] = setup.kernels
        run_spec = RunSpec(
            tasks=list(tasks),
            out_dir=arm_dir(spec.out_dir, arm),
            lengths=lengths,
            limit=limit,
            seed=seed,
            data_dir=spec.data_dir,
            max_new_tokens=spec.max_new_tokens,
            gold_logprob=spec.gold_logprob,
            manifest=manifest,
            request_cache=request_cache,
        )
        try:
            outcome = run_evaluation(run_spec, setup.backend, setup.tokenizer, progress=spec.progress)
        finally:
            setup.backend.engine.close()
        _log(
            f"{arm.label}: {outcome.stored} new samples ({outcome.skipped} on disk), "
            f"{outcome.wall_s:.1f} s -> {run_spec.out_dir}"
        )
    return summarize_sweep(spec.out_dir, spec.arms, spec.margin)


def summarize_sweep(
    out_dir: Path, arms: list[Arm], margin: float, runs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Pair every arm's run directory with the baseline's; write sweep.json, sweep.md, sweep.png.
    `runs` (label -> RunData): the arms' runs when the caller has loaded them already."""
    from evalkit.store import load_run
    from evalkit.store.headroom import headroom_record
    from evalkit.sweep.cells import length_verdicts, sweep_cells
    from evalkit.sweep.margin import bits_of_margin
    from evalkit.sweep.plot import write_plot
    from evalkit.sweep.report import write_report

    base = baseline_of(arms)
    runs = runs if runs is not None else {a.label: load_run(arm_dir(out_dir, a)) for a in arms}
    by_label = {a.label: a for a in arms}
    cells = sweep_cells(runs, base.label, margin)
    verdicts = length_verdicts(cells, margin)
    summary = {
        "baseline": base.label,
        "margin": margin,
        "arms": [
            {
                "label": a.label,
                "dir": a.label,
                "format": a.format.describe(),
                "mantissa_bits": a.mantissa_bits,
                "prefill_chunk_size": a.prefill_chunk_size,
                "intra_chunk_dtype": a.intra_chunk_dtype,
            }
            for a in arms
        ],
        "cells": cells,
        "lengths": [
            {"arm": arm, "length": length, **v} for (arm, length), v in verdicts.items() if arm != base.label
        ],
        "bits_of_margin": bits_of_margin(verdicts, by_label, base.label, margin),
        "exponent_headroom": {
            a.label: headroom_record(runs[a.label].samples, a.format.max_finite)
            for a in arms
            if any("state_max_abs" in s for s in runs[a.label].samples)
        },
    }
    write_report(Path(out_dir), summary)
    write_plot(Path(out_dir) / "sweep.png", summary, by_label)
    return summary
