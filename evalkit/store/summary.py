"""summary.json: per task, metric and length, the accuracy a reader sees first.

{task: {metric: {length-or-"all": {n, accuracy, stderr, errors[, mean_score, score_stderr]}}}}.
Errored samples are excluded from n and counted in `errors`; stderr is lm-eval's
sqrt(p(1-p)/(n-1)). Tasks with lengths get one entry per length plus "all".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from evalkit.stats.stderr import lmeval_stderr


def _sd_stderr(values: list[float]) -> float:
    n = len(values)
    if n <= 1:
        return math.nan
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def summarise(
    samples: Iterable[dict[str, Any]], metrics_of: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """`metrics_of` ({task: metric names}) names the metrics of a task whose every sample errored
    (its samples carry none); without it such a task's errors are listed under "unscored"."""
    right: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    scores: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    errors: dict = defaultdict(lambda: defaultdict(int))
    metrics: dict = defaultdict(set)
    for s in samples:
        task, length = s["task"], s.get("length")
        buckets = ["all"] if length is None else [str(length), "all"]
        metrics[task].update(s.get("correct") or {})
        metrics[task].update(s.get("score") or {})
        if s.get("error") is not None:
            for b in buckets:
                errors[task][b] += 1
            continue
        for b in buckets:
            for m, ok in (s.get("correct") or {}).items():
                right[task][m][b].append(bool(ok))
            for m, v in (s.get("score") or {}).items():
                scores[task][m][b].append(float(v))
    for task in errors:
        if not metrics[task]:
            metrics[task].update((metrics_of or {}).get(task) or ["unscored"])
    out: dict[str, Any] = {}
    for task in sorted(metrics):
        out[task] = {}
        for m in sorted(metrics[task]):
            cells: dict[str, Any] = {}
            buckets = set(right[task][m]) | set(scores[task][m]) | set(errors[task])
            for b in sorted(buckets, key=_bucket_order):
                vals = right[task][m].get(b, [])
                n, k = len(vals), sum(vals)
                cell: dict[str, Any] = {
                    "n": n,
                    "accuracy": k / n if n else None,
                    "stderr": _num(lmeval_stderr(k, n)),
                    "errors": errors[task].get(b, 0),
                }
                sc = scores[task][m].get(b)
                if sc:
                    cell["mean_score"] = sum(sc) / len(sc)
                    cell["score_stderr"] = _num(_sd_stderr(sc))
                cells[b] = cell
            out[task][m] = cells
    return out


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def _bucket_order(b: str) -> tuple[int, int]:
    return (1, 0) if b == "all" else (0, int(b))
