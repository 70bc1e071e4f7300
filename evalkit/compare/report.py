"""Build the comparison report (a plain dict: the JSON output, and the input of the renderers)."""

from __future__ import annotations

from typing import Any

from evalkit.compare.pairing import describe, pair_runs
from evalkit.compare.rows import add_holm, compute_row
from evalkit.compare.trend import length_trends
from evalkit.compare.verdict import overall_verdict, row_verdict
from evalkit.store import RunData

JSON_KEYS = (
    "task",
    "metric",
    "length",
    "n",
    "acc_baseline",
    "acc_candidate",
    "stderr_baseline",
    "stderr_candidate",
    "baseline_only",
    "candidate_only",
    "mcnemar_midp",
    "mcnemar_exact_p",
    "diff",
    "diff_ci_low",
    "diff_ci_high",
    "noninferiority_p",
    "mde",
)


def build_report(
    baseline: RunData,
    candidate: RunData,
    *,
    margin: float = 0.01,
    intersection: bool = False,
    allow_prompt_mismatch: bool = False,
) -> dict[str, Any]:
    pairing = pair_runs(
        baseline, candidate, intersection=intersection, allow_prompt_mismatch=allow_prompt_mismatch
    )
    rows = [
        compute_row(task, metric, length, pairs, margin=margin)
        for (task, metric, length), pairs in pairing.rows.items()
    ]
    add_holm(rows)
    for row in rows:
        row["verdict"], row["verdict_text"] = row_verdict(row)
    return {
        "baseline": describe(baseline),
        "candidate": describe(candidate),
        "margin": margin,
        "alpha": 0.05,
        "noninferiority_alpha": 0.025,
        "confidence": 0.95,
        "rows": rows,
        "trends": length_trends(pairing.rows),
        "excluded": {
            "errors": pairing.errors_excluded,
            "only_in_baseline": pairing.only_in_baseline,
            "only_in_candidate": pairing.only_in_candidate,
            "prompt_mismatches": pairing.prompt_mismatches,
        },
        "notes": pairing.notes,
        "verdict": overall_verdict(rows, margin),
    }
