"""Each arm against the baseline, per task x length: the one place the sweep calls the paired stats.

`paired_rows` (per task: `evalkit.compare`'s pairing with its refusals, McNemar, non-inferiority)
and `length_verdicts` (tasks pooled per length, for the bits of margin) are the only calls into
the statistics; swap them when `compare` grows. The gold log-probability numbers
here are descriptive (mean paired difference, sign changes of the greedy margin, where generations
depart); `evalkit compare` owns their tests.
"""

from __future__ import annotations

import math
from typing import Any

from evalkit.store.reader import RunData
from evalkit.store.schema import sample_key


def paired_rows(base: RunData, cand: RunData, margin: float) -> list[dict[str, Any]]:
    """`evalkit compare`'s rows (task, metric, length, n, accuracies, NI test, ...) for one pair."""
    from evalkit.compare.pairing import pair_runs
    from evalkit.compare.rows import compute_row

    pairing = pair_runs(base, cand)
    return [compute_row(t, m, n, pairs, margin=margin) for (t, m, n), pairs in pairing.rows.items()]


def length_verdicts(cells: list[dict[str, Any]], margin: float) -> dict[tuple, dict[str, Any]]:
    """Per (arm, length): the tasks' questions pooled (one metric per task, its first), tested for
    non-inferiority at `margin` like a `compare` row. Pooling doubles n with two tasks: a sweep
    runs few questions per cell, and "is this arm worse at this length" is the question asked."""
    from evalkit import stats as st

    first_metric: dict[str, str] = {}
    for c in sorted(cells, key=lambda c: c["metric"]):
        first_metric.setdefault(c["task"], c["metric"])
    pooled: dict[tuple, dict[str, int]] = {}
    for c in cells:
        if c["metric"] != first_metric[c["task"]]:
            continue
        p = pooled.setdefault(
            (c["arm"], c["length"]), {"n": 0, "baseline_only": 0, "candidate_only": 0, "baseline_right": 0}
        )
        for k in ("n", "baseline_only", "candidate_only"):
            p[k] += c[k]
        p["baseline_right"] += round(c["baseline_accuracy"] * c["n"])
    out = {}
    for key, p in pooled.items():
        ni = st.noninferiority_test(p["candidate_only"], p["baseline_only"], p["n"], margin=margin)
        out[key] = {**p, "noninferiority_p": ni.pvalue, "noninferior": bool(ni.noninferior)}
    return out


def gold_summary(base: RunData, cand: RunData) -> dict[tuple, dict[str, Any]]:
    """Per (task, length): paired gold log-probability summaries over questions both arms scored."""
    from evalkit.compare.logprob import first_departure

    bmap = {sample_key(s): s for s in base.samples if s.get("error") is None}
    acc: dict[tuple, dict[str, Any]] = {}
    for s in cand.samples:
        b = bmap.get(sample_key(s))
        if b is None or s.get("error") is not None:
            continue
        cell = acc.setdefault(
            (s["task"], s.get("length")),
            {"diffs": [], "margin_diffs": [], "sign_changes": 0, "departed": 0, "n_gen": 0},
        )
        if b.get("generated_ids") is not None and s.get("generated_ids") is not None:
            cell["n_gen"] += 1
            cell["departed"] += first_departure(b["generated_ids"], s["generated_ids"]) is not None
        lb, lc = b.get("gold_logprob"), s.get("gold_logprob")
        if lb is None or lc is None:
            continue
        cell["diffs"].append(lc - lb)
        mb, mc = b.get("gold_min_margin"), s.get("gold_min_margin")
        if mb is not None and mc is not None:
            cell["margin_diffs"].append(mc - mb)
            cell["sign_changes"] += (mb > 0) != (mc > 0)
    out = {}
    for key, c in acc.items():
        d = c["diffs"]
        out[key] = {
            "gold_n": len(d),
            "gold_delta_mean": math.fsum(d) / len(d) if d else None,
            "gold_delta_max_abs": max((abs(x) for x in d), default=None),
            "margin_sign_changes": c["sign_changes"] if c["margin_diffs"] else None,
            "min_margin_delta_mean": (
                math.fsum(c["margin_diffs"]) / len(c["margin_diffs"]) if c["margin_diffs"] else None
            ),
            "generations_compared": c["n_gen"],
            "generations_departed": c["departed"],
        }
    return out


def sweep_cells(runs: dict[str, RunData], baseline: str, margin: float) -> list[dict[str, Any]]:
    """One record per arm x task x metric x length (the baseline against itself included)."""
    cells = []
    base = runs[baseline]
    for label, run in runs.items():
        gold = gold_summary(base, run)
        for row in paired_rows(base, run, margin):
            g = gold.get((row["task"], row["length"]), {})
            cells.append(
                {
                    "arm": label,
                    "task": row["task"],
                    "metric": row["metric"],
                    "length": row["length"],
                    "n": row["n"],
                    "accuracy": row["acc_candidate"],
                    "baseline_accuracy": row["acc_baseline"],
                    "baseline_only": row["baseline_only"],
                    "candidate_only": row["candidate_only"],
                    "mcnemar_midp": row["mcnemar_midp"],
                    "noninferiority_p": row["noninferiority_p"],
                    "noninferior": bool(row["noninferior"]),
                    **g,
                }
            )
    return cells
