"""Run a plan's cells in stages with one loaded model: at look k each undecided cell is brought up
to its first n_k questions, and stops once a look decides it or at the plan's n for that cell.

The arms are interleaved per question: question q is answered by the baseline, then by the
candidate, before question q + 1 is asked, so a stop at any point (a decision, Ctrl-C, a crash)
leaves complete pairs and at most one half-answered question. `block` B > 1 interleaves blocks of
B questions instead (the baseline answers questions q..q+B-1 together, then the candidate): a GPU
decodes them as one batch, the looks fall where they did (a block never crosses a look's n), and
a stop leaves at most one half-answered block; batch-invariant decoding makes the answers the
same as with B = 1. Each arm keeps one engine for the whole run. Each arm's answers live in
DIR/<cell>/<arm>/, normal run directories: a re-run resumes them (questions already answered are
not asked again) and recomputes the same decisions from the stored samples.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.ab.looks import judge_look, look_fractions, look_sizes
from evalkit.arm import Arm
from evalkit.compare.plan_file import Plan, PlanCell
from evalkit.errors import InputError


@dataclass
class AbSpec:
    plan: Plan
    baseline: Arm
    candidate: Arm
    out_dir: Path
    model: str | None = None
    looks: int = 3
    spending: str = "obf"
    seed: int | None = None
    data_dir: str | None = None
    max_new_tokens: int | None = None
    device: str | None = None
    max_num_seqs: int | None = None
    block: int = 1
    progress: bool = True
    command: list[str] = field(default_factory=list)


@dataclass
class _Context:
    """What every question of the run shares: the loaded model, the arms' engines, the caches."""

    model: str
    device: str
    loaded: Any
    budget: Any
    setups: dict[str, Any] = field(default_factory=dict)
    request_cache: dict[str, Any] = field(default_factory=dict)
    encode_cache: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        for setup in self.setups.values():
            setup.backend.engine.close()
        self.setups.clear()


def cell_dir(out_dir: Path, cell: PlanCell) -> Path:
    return Path(out_dir) / (cell.task + ("" if cell.length is None else f"@{cell.length}"))


def _log(msg: str) -> None:
    print(f"evalkit ab: {msg}", file=sys.stderr, flush=True)


def _counts(base_dir: Path, cand_dir: Path, n_k: int) -> tuple[int, int, int, list[float], float]:
    """(candidate-only right, baseline-only right, n, log-prob shifts, baseline accuracy) of the
    cell's first metric, over its first n_k questions only: a resumed run holds later looks'
    questions too, and look k must not see them."""
    from evalkit.compare.pairing import pair_runs
    from evalkit.store import load_run
    from evalkit.store.schema import doc_sort_key

    pairing = pair_runs(load_run(base_dir), load_run(cand_dir), intersection=True)
    pairs = sorted(next(iter(pairing.rows.values())), key=lambda p: doc_sort_key(p.doc_id))[:n_k]
    cand_only = sum(p.candidate and not p.baseline for p in pairs)
    base_only = sum(p.baseline and not p.candidate for p in pairs)
    from evalkit.compare.logprob import _per_token

    shifts = [
        c - b
        for p in pairs
        if (b := _per_token(p.baseline_sample or {})) is not None
        and (c := _per_token(p.candidate_sample or {})) is not None
    ]
    base_acc = sum(bool(p.baseline) for p in pairs) / len(pairs) if pairs else 0.0
    return cand_only, base_only, len(pairs), shifts, base_acc


def _answered(run_dir: Path) -> int:
    """Questions the arm's run directory already holds (0 before its first question)."""
    from evalkit.store import load_run

    if not (run_dir / "manifest.json").exists():
        return 0
    return len({s.get("doc_id") for s in load_run(run_dir).samples})


def _interleaving(block: int) -> str:
    return "per question" if block == 1 else f"per block of {block} questions"


def _arm_setup(spec: AbSpec, arm: Arm, context: _Context) -> Any:
    """The arm's engine, built on its first question and kept until the run ends."""
    from evalkit.runner import setup as su

    if arm.label not in context.setups:
        context.setups[arm.label] = su.local_setup(
            context.model,
            arm,
            None,
            context.device,
            spec.max_num_seqs,
            loaded=context.loaded,
            prefill_budget=context.budget,
            encode_cache=context.encode_cache,
        )
    return context.setups[arm.label]


def _answer(spec: AbSpec, cell: PlanCell, arm: Arm, q: int, context: _Context) -> None:
    """The arm answers the cell's first q questions (those it has not answered yet)."""
    from evalkit.runner import RunSpec, run_evaluation
    from evalkit.runner import setup as su

    setup = _arm_setup(spec, arm, context)
    manifest = su.base_manifest_fields(spec.command or ["evalkit", "ab"])
    manifest.update(
        model=setup.model,
        arm=setup.arm,
        backend=setup.backend.describe(),
        seeds={"task_seed": spec.seed},
        plan=spec.plan.identity(),
        ab={
            "looks": spec.looks,
            "spending": spec.spending,
            "cell": cell.name,
            "interleaved": _interleaving(spec.block),
        },
    )
    run_spec = RunSpec(
        tasks=[cell.task],
        out_dir=cell_dir(spec.out_dir, cell) / arm.label,
        lengths=None if cell.length is None else [cell.length],
        limit=q,
        seed=spec.seed,
        data_dir=spec.data_dir,
        max_new_tokens=spec.max_new_tokens,
        gold_logprob=True,  # the paired log-prob measure a plan may gate on
        manifest=manifest,
        request_cache=context.request_cache,
    )
    run_evaluation(run_spec, setup.backend, setup.tokenizer, progress=False)


def check_spec(spec: AbSpec) -> None:
    if spec.looks < 1:
        raise InputError("--looks must be at least 1")
    if spec.block < 1:
        raise InputError("--block must be at least 1")
    missing = [c.name for c in spec.plan.cells if c.n is None]
    if missing:
        raise InputError(f"{spec.plan.path}: cells without a planned n: {', '.join(missing)}")
    if spec.baseline.label == spec.candidate.label:
        raise InputError("the baseline and the candidate are the same arm")


def _fill_to(spec: AbSpec, cell: PlanCell, n_k: int, context: _Context) -> None:
    """Both arms answer the cell's first n_k questions, alternating per block of spec.block
    questions; an arm a stop left behind catches up first."""
    arms = (spec.baseline, spec.candidate)
    answered = [_answered(cell_dir(spec.out_dir, cell) / arm.label) for arm in arms]
    q = min(answered)
    while q < n_k:
        q = min(q + spec.block, n_k)
        for i, arm in enumerate(arms):
            if answered[i] < q:
                _answer(spec, cell, arm, q, context)
                answered[i] = q


def _look(spec: AbSpec, design: Any, cell: PlanCell, k: int, record: dict[str, Any]) -> None:
    """Judge look k of the cell on its first looks_at[k] pairs; append it to the cell's record."""
    n_k = record["looks_at"][k]
    base_dir, cand_dir = (cell_dir(spec.out_dir, cell) / a.label for a in (spec.baseline, spec.candidate))
    b, c, n, shifts, base_acc = _counts(base_dir, cand_dir, n_k)
    plan = spec.plan
    boundary = None
    if base_acc <= plan.floor:
        boundary = "cannot_lose"
    elif base_acc >= plan.ceiling:
        boundary = "cannot_gain"
    look = judge_look(
        design,
        k,
        b,
        c,
        n,
        cell.em_margin,
        gate=plan.gate,
        logprob_diffs=shifts,
        logprob_margin=cell.logprob_margin,
        earlier_discordant=[x["candidate_only"] + x["baseline_only"] for x in record["looks"]],
        boundary=boundary,
    )
    record["looks"].append(look)
    _log(f"{cell.name} look {k + 1}/{spec.looks} at n = {n}: {look['decision']}")


def run_ab(spec: AbSpec) -> dict[str, Any]:
    """Run every cell until decided or at its planned n; write DIR/ab.json and return it."""
    from evalkit.model.loader import load_model
    from evalkit.runner import setup as su
    from evalkit.stats.sequential import normal_design
    from evalkit.sweep.runner import prefill_budget

    check_spec(spec)
    design = normal_design(look_fractions(spec.looks), spec.plan.alpha, spec.spending)
    model = spec.model
    if model is None:
        model, _suite = su.default_model()
    device = spec.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    loaded = load_model(model, device=device)
    _log(f"loaded {model} on {device} in {time.perf_counter() - t0:.1f} s")
    arms = (spec.baseline, spec.candidate)
    context = _Context(model, device, loaded, prefill_budget(list(arms), device))
    cells = {
        c.name: {
            "task": c.task,
            "length": c.length,
            "n_max": c.n_max or c.n,
            "looks_at": look_sizes(c.n_max or c.n or 1, spec.looks),
            "looks": [],
        }
        for c in spec.plan.cells
    }
    try:
        for k in range(spec.looks):
            for cell in spec.plan.cells:
                record = cells[cell.name]
                if not (record["looks"] and record["looks"][-1]["stops"]):
                    _fill_to(spec, cell, record["looks_at"][k], context)
                    _look(spec, design, cell, k, record)
    finally:
        context.close()
    summary = {
        "plan": spec.plan.identity(),
        "baseline": spec.baseline.label,
        "candidate": spec.candidate.label,
        "design": {
            "looks": spec.looks,
            "spending": spec.spending,
            "alpha": spec.plan.alpha,
            "bounds": list(design.bounds),
            "gate": spec.plan.gate,
            "futility": "non-binding: repeated CI's upper end below -margin",
            "loss": "exact: the baseline-only count against the sign walk's critical count given "
            "the discordant counts at the looks, the same spending at the looks' fractions",
            "interleaving": _interleaving(spec.block) + ": the baseline, then the candidate",
        },
        "cells": [
            {**r, "n_used": r["looks"][-1]["n"], "decision": r["looks"][-1]["decision"]}
            for r in cells.values()
        ],
    }
    Path(spec.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(spec.out_dir) / "ab.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
