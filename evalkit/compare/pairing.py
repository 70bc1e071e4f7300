"""Pair two runs question by question (sampled runs: by question and sample index), refusing (one
clear line) anything that makes pairing unsound.

Refused: runs of different tasks, a task whose config hash differs, questions on one side only
(unless `intersection`), a paired question asked with a different prompt (unless
`allow_prompt_mismatch`). Pairs where either side has an error are excluded and counted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from evalkit.compare.metric_names import align_metric_names
from evalkit.errors import MismatchError
from evalkit.store import RunData, sample_key
from evalkit.store.schema import doc_sort_key

SHOW = 5  # how many ids an error message lists

RowKey = tuple  # (task, metric, length)


@dataclass
class Pair:
    doc_id: str
    length: int | None
    baseline: bool
    candidate: bool
    baseline_sample: dict[str, Any] | None = field(default=None, repr=False)
    candidate_sample: dict[str, Any] | None = field(default=None, repr=False)
    sample: int | None = None  # sample j of the question in sampled runs (evalkit run --temperature)


@dataclass
class Pairing:
    rows: dict[RowKey, list[Pair]]
    tasks: list[str]
    errors_excluded: dict[str, int] = field(default_factory=dict)
    only_in_baseline: int = 0
    only_in_candidate: int = 0
    prompt_mismatches: int = 0
    notes: list[str] = field(default_factory=list)


def _fmt_key(key: tuple) -> str:
    task, doc, length, *sample = key
    return f"{task}/{doc}" + ("" if length is None else f"@{length}") + "".join(f"#{j}" for j in sample)


def _examples(keys: list[tuple]) -> str:
    shown = ", ".join(_fmt_key(k) for k in sorted(keys, key=_sort_key)[:SHOW])
    return shown + (", ..." if len(keys) > SHOW else "")


def _sort_key(key: tuple) -> tuple:
    task, doc, length, *sample = key  # (question, sample j) in sampled runs
    return task, doc_sort_key(doc), length or 0, *sample


def _task_hash(run: RunData, task: str) -> str | None:
    tasks = run.manifest.get("tasks")
    spec = tasks.get(task) if isinstance(tasks, dict) else None
    return spec.get("hash") if isinstance(spec, dict) else None


def _check_tasks(base: RunData, cand: RunData, intersection: bool, notes: list[str]) -> list[str]:
    tb, tc = set(base.tasks), set(cand.tasks)
    shared = sorted(tb & tc)
    if tb != tc:
        detail = f"baseline has {', '.join(sorted(tb))}; candidate has {', '.join(sorted(tc))}"
        if not shared:
            raise MismatchError(f"runs of different tasks: {detail}")
        if not intersection:
            raise MismatchError(
                f"runs of different tasks: {detail} (pass --intersection to compare the "
                f"shared task(s) {', '.join(shared)})"
            )
        notes.append(f"compared the shared task(s) {', '.join(shared)} only ({detail})")
    for task in shared:
        hb, hc = _task_hash(base, task), _task_hash(cand, task)
        if hb and hc and hb != hc:
            raise MismatchError(
                f"task {task!r} has a different config in the two runs (config hash "
                f"{hb[:12]} vs {hc[:12]}): they did not ask the same questions the same way"
            )
    return shared


def pair_runs(
    base: RunData, cand: RunData, *, intersection: bool = False, allow_prompt_mismatch: bool = False
) -> Pairing:
    notes: list[str] = []
    tasks = _check_tasks(base, cand, intersection, notes)
    keep = set(tasks)
    bmap = {sample_key(s): s for s in base.samples if s["task"] in keep}
    cmap = {sample_key(s): s for s in cand.samples if s["task"] in keep}
    only_b = [k for k in bmap if k not in cmap]
    only_c = [k for k in cmap if k not in bmap]
    shared = [k for k in bmap if k in cmap]
    if not shared:
        raise MismatchError(
            f"the runs share no question (baseline {len(bmap)}, candidate {len(cmap)}): "
            f"are the doc ids and lengths from the same task data?"
        )
    if (only_b or only_c) and not intersection:
        parts = []
        if only_b:
            parts.append(f"{len(only_b)} only in baseline, e.g. {_examples(only_b)}")
        if only_c:
            parts.append(f"{len(only_c)} only in candidate, e.g. {_examples(only_c)}")
        raise MismatchError(
            f"the runs have different questions: baseline {len(bmap)}, "
            f"candidate {len(cmap)}, shared {len(shared)} ({'; '.join(parts)}); "
            f"pass --intersection to compare the {len(shared)} shared ones"
        )
    if only_b or only_c:
        notes.append(
            f"--intersection: compared {len(shared)} shared questions; left out {len(only_b)} "
            f"baseline-only and {len(only_c)} candidate-only questions"
        )
    mismatched = [k for k in shared if bmap[k]["prompt_hash"] != cmap[k]["prompt_hash"]]
    if mismatched and not allow_prompt_mismatch:
        raise MismatchError(
            f"{len(mismatched)} of {len(shared)} paired questions were asked with different "
            f"prompts (prompt_hash differs): {_examples(mismatched)}; pass "
            f"--allow-prompt-mismatch to compare anyway"
        )
    if mismatched:
        notes.append(
            f"--allow-prompt-mismatch: {len(mismatched)} paired questions had different prompts "
            f"(e.g. {_examples(mismatched)})"
        )
    rows: dict[RowKey, list[Pair]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    only_metric: dict[str, set[str]] = {"baseline": set(), "candidate": set()}
    names: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for key in shared:
        names[key[0]][0].update(bmap[key]["correct"])
        names[key[0]][1].update(cmap[key]["correct"])
    aliases = {task: align_metric_names(*sides) for task, sides in names.items()}
    for key in sorted(shared, key=_sort_key):
        b, c = bmap[key], cmap[key]
        task, doc, length, *sample = key
        if b["error"] is not None or c["error"] is not None:
            errors[task] += 1
            continue
        b_alias, c_alias = aliases[task]
        b_correct = {b_alias[m]: v for m, v in b["correct"].items()}
        c_correct = {c_alias[m]: v for m, v in c["correct"].items()}
        only_metric["baseline"].update(f"{task}:{m}" for m in b_correct if m not in c_correct)
        only_metric["candidate"].update(f"{task}:{m}" for m in c_correct if m not in b_correct)
        for metric, right in b_correct.items():
            if metric in c_correct:
                j = sample[0] if sample else None
                rows[(task, metric, length)].append(Pair(doc, length, right, c_correct[metric], b, c, j))
    for side, names in only_metric.items():
        if names:
            notes.append(f"metric(s) scored only in the {side} run, not compared: {', '.join(sorted(names))}")
    for task, count in sorted(errors.items()):
        notes.append(f"{task}: {count} paired question(s) excluded because a side has an error")
    if not rows:
        raise MismatchError(
            "no pair left to compare: every paired question has an error on one side "
            "or the runs share no metric"
        )
    ordered = dict(sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)))
    return Pairing(ordered, tasks, dict(errors), len(only_b), len(only_c), len(mismatched), notes)


def describe(run: RunData) -> dict[str, Any]:
    return {"path": run.path, "label": run.label, "kind": run.kind, "samples": len(run.samples)}
