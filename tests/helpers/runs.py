"""Write small evalkit run directories with planted discordant counts, for compare tests."""

from __future__ import annotations

from pathlib import Path

from evalkit.store import RunWriter, config_hash, prompt_hash


def planted_sample(task: str, doc: int, length, right: bool, metric: str) -> dict:
    """One finished sample whose response is right or wrong as planted (target "1")."""
    return {
        "task": task,
        "doc_id": doc,
        "length": length,
        "prompt_hash": prompt_hash(f"{task}/{doc}@{length}"),
        "target": "1",
        "response": "1" if right else "0",
        "correct": {metric: right},
        "error": None,
    }


def manifest(arm: str, tasks, backend: str = "openai") -> dict:
    cfg = {"shots": 0}
    return {
        "model": {"path": "m"},
        "backend": {"name": backend},
        "arm": {"label": arm},
        "tasks": {t: {"config": cfg, "hash": config_hash(cfg)} for t in tasks},
    }


def write_cells(
    root: Path,
    cells: dict,
    *,
    metric: str = "em",
    finish: bool = True,
    backend: str = "openai",
    extra=None,
) -> tuple[Path, Path]:
    """cells: {(task, length): (baseline_only, candidate_only, n)}; both right elsewhere.

    `extra(side, task, doc, length) -> dict` adds fields to each sample (side "base"/"cand").
    """
    tasks = sorted({task for task, _ in cells})
    paths = []
    for side in ("base", "cand"):
        w = RunWriter.open(root / side, manifest(side, tasks, backend), durable=False)
        for (task, length), (b_only, c_only, n) in cells.items():
            for doc in range(n):
                if side == "base":
                    right = not (b_only <= doc < b_only + c_only)
                else:
                    right = doc >= b_only
                sample = planted_sample(task, doc, length, right, metric)
                if extra is not None:
                    sample.update(extra(side, task, doc, length))
                w.append(sample)
        if finish:
            w.finish()
        else:
            w.close()
        paths.append(root / side)
    return paths[0], paths[1]


def write_run(path: Path, arm: str, outcomes: dict, *, backend: str = "openai", extra=None) -> Path:
    """outcomes: {(task, doc, length): right}; `extra(task, doc, length) -> dict` adds fields."""
    tasks = sorted({task for task, _, _ in outcomes})
    w = RunWriter.open(path, manifest(arm, tasks, backend), durable=False)
    for (task, doc, length), right in outcomes.items():
        sample = planted_sample(task, doc, length, right, "em")
        if extra is not None:
            sample.update(extra(task, doc, length))
        w.append(sample)
    w.finish()
    return path
