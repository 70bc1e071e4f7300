"""Item accuracy by position in the answer, paired between two runs.

The decode-heavy tasks store per-item flags (`item_correct`, answer order) on every sample. Does
the 400th generated item fail more often under a 16-bit state than the 40th? For each bucket of
answer positions this gives both arms' item accuracy and their paired difference (candidate minus
baseline) with a normal CI whose standard error is clustered by question (Miller 2024,
`evalkit.stats.cluster`): the items of one answer are not independent draws.

    rows = position_differences(base_samples, cand_samples, task="copy_list_long", bucket=16)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from evalkit.stats._result import Result
from evalkit.stats.accuracy import z_value
from evalkit.stats.cluster import clustered_se
from evalkit.store.schema import sample_key


@dataclass(frozen=True)
class PositionBucket(Result):
    first: int  # first answer position in the bucket (0-based)
    last: int  # last answer position in the bucket
    n_items: int  # paired items
    n_questions: int  # paired answers contributing items
    base_accuracy: float
    cand_accuracy: float
    difference: float  # cand - base
    ci_low: float
    ci_high: float
    se_clustered: float
    title: ClassVar[str] = "Paired item accuracy in one bucket of answer positions"


def _items(samples: Iterable[dict[str, Any]], task: str | None, length: int | None) -> dict:
    out = {}
    for s in samples:
        if s.get("error") is not None or s.get("item_correct") is None:
            continue
        key = sample_key(s)
        if (task is None or key[0] == task) and (length is None or key[2] == length):
            out[key] = [bool(x) for x in s["item_correct"]]
    return out


def position_differences(
    base: Iterable[dict[str, Any]],
    cand: Iterable[dict[str, Any]],
    *,
    task: str | None = None,
    length: int | None = None,
    bucket: int = 16,
    confidence: float = 0.95,
) -> list[PositionBucket]:
    """Per bucket of `bucket` answer positions: both arms' item accuracy and the paired difference
    (cand - base) with a clustered-SE normal CI. Samples are paired on (task, doc_id, length);
    items on their position; only questions scored in both runs (no error) count."""
    if bucket < 1:
        raise ValueError("bucket must be a positive number of positions")
    a, b = _items(base, task, length), _items(cand, task, length)
    z = z_value(confidence)
    cells: dict[int, tuple[list[float], list[float], list[float], list[Any]]] = {}
    for key in sorted(set(a) & set(b), key=str):
        for pos, (x, y) in enumerate(zip(a[key], b[key])):
            base_v, cand_v, diffs, clusters = cells.setdefault(pos // bucket, ([], [], [], []))
            base_v.append(float(x))
            cand_v.append(float(y))
            diffs.append(float(y) - float(x))
            clusters.append(key)
    rows = []
    for k in sorted(cells):
        base_v, cand_v, diffs, clusters = cells[k]
        n = len(diffs)
        mean = sum(diffs) / n
        se = clustered_se(diffs, clusters).se_clustered if n >= 2 else float("nan")
        rows.append(
            PositionBucket(
                first=k * bucket,
                last=k * bucket + bucket - 1,
                n_items=n,
                n_questions=len(set(clusters)),
                base_accuracy=sum(base_v) / n,
                cand_accuracy=sum(cand_v) / n,
                difference=mean,
                ci_low=mean - z * se,
                ci_high=mean + z * se,
                se_clustered=se,
            )
        )
    return rows


def position_report(
    base: list[dict[str, Any]], cand: list[dict[str, Any]], *, bucket: int = 16
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """`position_differences` for every (task, length) whose samples carry `item_correct`:
    {task: {length: [bucket rows as dicts]}} (JSON-able)."""
    cells = sorted({(s["task"], s.get("length")) for s in base if s.get("item_correct") is not None}, key=str)
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for task, length in cells:
        rows = position_differences(base, cand, task=task, length=length, bucket=bucket)
        if rows:
            out.setdefault(task, {})[str(length)] = [r.to_dict() for r in rows]
    return out
