"""RULER's length summary for tasks run at several context lengths: the per-length average over
the long-context cells, and each arm's effective length.

Effective length (RULER's idea, made paired): per task x metric, the threshold is the baseline's
accuracy at its shortest tested length minus `EFFECTIVE_DROP` (5 pp); an arm's effective length
is the longest tested length up to which its accuracy stays at or above the threshold at every
tested length (RULER takes the longest length above a fixed bar, 85.6% = Llama-2-7B at 4k; a bar
taken from the baseline itself measures what the state precision costs, whatever the model).
None when the arm is already below the threshold at the shortest length.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

EFFECTIVE_DROP = 0.05  # a fraction: 5 percentage points below the baseline's shortest length

RULE = (
    "the longest tested length up to which the arm's accuracy stays at or above "
    f"the baseline's accuracy at the shortest length minus {100 * EFFECTIVE_DROP:g} pp"
)


def _effective(lengths: list[int], acc: dict[int, float], threshold: float) -> int | None:
    kept = None
    for length in lengths:
        if acc[length] < threshold - 1e-12:  # k/n against a difference of fractions: no rounding flip
            break
        kept = length
    return kept


def length_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """{"rule", "per_length": [{length, cells, baseline_mean, candidate_mean, diff}],
    "effective": [{task, metric, lengths, threshold, baseline, candidate}]}; fractions throughout."""
    by_cell: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r["length"] is not None:
            by_cell[(r["task"], r["metric"])][r["length"]] = r
    multi = {key: cells for key, cells in by_cell.items() if len(cells) >= 2}
    by_length: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for cells in multi.values():
        for length, r in cells.items():
            by_length[length].append(r)
    per_length = []
    for length in sorted(by_length):
        cells = by_length[length]
        base = sum(r["acc_baseline"] for r in cells) / len(cells)
        cand = sum(r["acc_candidate"] for r in cells) / len(cells)
        per_length.append(
            {
                "length": length,
                "cells": len(cells),
                "baseline_mean": base,
                "candidate_mean": cand,
                "diff": cand - base,
            }
        )
    effective = []
    for (task, metric), cells in multi.items():
        lengths = sorted(cells)
        threshold = cells[lengths[0]]["acc_baseline"] - EFFECTIVE_DROP
        effective.append(
            {
                "task": task,
                "metric": metric,
                "lengths": lengths,
                "threshold": threshold,
                "baseline": _effective(lengths, {n: cells[n]["acc_baseline"] for n in lengths}, threshold),
                "candidate": _effective(lengths, {n: cells[n]["acc_candidate"] for n in lengths}, threshold),
            }
        )
    return {"rule": RULE, "per_length": per_length, "effective": effective}


def _shown(effective: int | None, lengths: list[int]) -> str:
    return str(effective) if effective is not None else f"< {lengths[0]}"


def length_summary_markdown(summary: dict[str, Any], base: str, cand: str) -> list[str]:
    if not summary["per_length"]:
        return []
    lines = [
        "",
        "**By length** (mean accuracy over the multi-length task × metric cells, as RULER averages)",
        "",
        f"| length | cells | {base} % | {cand} % | Δ pp |",
        "|---:|---:|---:|---:|---:|",
    ]
    for p in summary["per_length"]:
        lines.append(
            f"| {p['length']} | {p['cells']} | {100 * p['baseline_mean']:.2f} | "
            f"{100 * p['candidate_mean']:.2f} | {100 * p['diff']:+.2f} |"
        )
    lines += [
        "",
        f"**Effective length** ({summary['rule']})",
        "",
        f"| task | metric | threshold % | {base} | {cand} |",
        "|---|---|---:|---:|---:|",
    ]
    for e in summary["effective"]:
        lines.append(
            f"| {e['task']} | {e['metric']} | {100 * e['threshold']:.2f} | "
            f"{_shown(e['baseline'], e['lengths'])} | {_shown(e['candidate'], e['lengths'])} |"
        )
    return lines
