"""The paired test of item-fraction scores: where a task scores each question by the fraction of its
items right (`score[metric]` in (0, 1), e.g. kv_recite_long), exact match reads only "all items
right", so a candidate that loses two items of forty reads "identical". Per task × metric × length
this reports the paired differences d_i = candidate − baseline of the item fraction: the mean,
the Wilcoxon signed-rank test with the Hodges–Lehmann estimate (distribution-free: the scores are
bounded and often tied at 0), and whether the baseline leaves room (a baseline at 1.0 on every
question cannot be beaten; one at 0.0 cannot be lost).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evalkit import stats as st
from evalkit.compare.pairing import Pair, RowKey


def _fraction(sample: dict[str, Any] | None, metric: str, continuous: bool = False) -> float | None:
    """The item fraction; in a `continuous` cell a sample without one reads its 0/1 `correct`
    (an lm-eval log records a fraction only where it is strictly between 0 and 1)."""
    score = (sample or {}).get("score")
    value = score.get(metric) if isinstance(score, dict) else None
    if value is None and continuous:
        value = ((sample or {}).get("correct") or {}).get(metric)
        return None if not isinstance(value, bool) else float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def item_score_cell(key: RowKey, pairs: list[Pair]) -> dict[str, Any] | None:
    """None unless some question of the cell has a fractional score (strictly between 0 and 1);
    then every paired question counts, a 0/1 `correct` standing in for a missing fraction."""
    task, metric, length = key
    continuous = any(
        (v := _fraction(s, metric)) is not None and 0.0 < v < 1.0
        for p in pairs
        for s in (p.baseline_sample, p.candidate_sample)
    )
    if not continuous:
        return None
    both = [
        (b, c)
        for p in pairs
        if (b := _fraction(p.baseline_sample, metric, True)) is not None
        and (c := _fraction(p.candidate_sample, metric, True)) is not None
    ]
    if not both:
        return None
    base = np.array([b for b, _ in both])
    d = np.array([c - b for b, c in both])
    sr = st.signed_rank(d)
    room = "cannot gain" if np.all(base == 1.0) else "cannot lose" if np.all(base == 0.0) else None
    return {
        "task": task,
        "metric": metric,
        "length": length,
        "n": int(d.size),
        "baseline_mean": float(base.mean()),
        "mean_diff": float(d.mean()),
        "questions_changed": int(np.count_nonzero(d)),
        "hodges_lehmann": sr.hodges_lehmann,
        "hl_ci": [sr.ci_low, sr.ci_high],
        "wilcoxon_pvalue": sr.pvalue,
        "room": room,
    }


def item_scores_report(rows: dict[RowKey, list[Pair]]) -> list[dict[str, Any]]:
    return [cell for key, pairs in rows.items() if (cell := item_score_cell(key, pairs)) is not None]


def item_scores_markdown(cells: list[dict[str, Any]]) -> list[str]:
    if not cells:
        return []
    lines = [
        "",
        "**Item-fraction scores** (paired per question, candidate − baseline; Wilcoxon signed-rank)",
        "",
        "| task | metric | length | n | baseline mean | mean Δ | questions changed | HL (95% CI) | p "
        "| room |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in cells:
        lo, hi = c["hl_ci"]
        lines.append(
            f"| {c['task']} | {c['metric']} | {c['length'] or '–'} | {c['n']} | {c['baseline_mean']:.3f} | "
            f"{c['mean_diff']:+.4f} | {c['questions_changed']} | {c['hodges_lehmann']:+.4f} ({lo:+.4f}, "
            f"{hi:+.4f}) | {c['wilcoxon_pvalue']:.3g} | {c['room'] or '–'} |"
        )
    return lines
