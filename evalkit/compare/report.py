"""Build the comparison report (a plain dict: the JSON output, and the input of the renderers).

The JSON carries `schema_version` (bumped on any incompatible change), an overall `outcome`
(the worst row verdict), the gate's `status` (pass | fail | ungated) and one `verdict` enum
value per row (see `evalkit.compare.verdict.VERDICTS`).
"""

from __future__ import annotations

from typing import Any

from evalkit.compare.benefit import benefit_report
from evalkit.compare.clustered import apply_clustered_verdicts, clustered_rows, sampling_report
from evalkit.compare.decision import NOT_PREREGISTERED, check_plan_matches, decide
from evalkit.compare.effective_length import length_summary
from evalkit.compare.gate import evaluate_gate
from evalkit.compare.item_scores import item_scores_report
from evalkit.compare.labels import short_labels
from evalkit.compare.logprob import DEFAULT_LOGPROB_MARGIN, logprob_report
from evalkit.compare.margins import Margins, check_tasks, parse_margins
from evalkit.compare.pairing import describe, pair_runs
from evalkit.compare.plan_file import Plan
from evalkit.compare.replicate import replicate_report
from evalkit.compare.rows import add_holm, compute_row, overflow_notes
from evalkit.compare.trend import length_trends
from evalkit.compare.verdict import VERDICTS, overall_outcome, overall_verdict, row_verdict
from evalkit.errors import InputError
from evalkit.store import RunData

SCHEMA_VERSION = 2

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
    "verdict",
)


def _sampled_part(
    sampling: dict[str, Any] | None,
    pairing: Any,
    rows: list[dict[str, Any]],
    cell_margin: Any,
    ni_alpha: float,
    plan: Plan | None,
) -> dict[str, Any]:
    """Sampled runs: the clustered analysis per row; with k > 1 it also gives the rows' verdicts
    (the per-sample tests count correlated samples as independent pairs)."""
    if sampling is None:
        return {}
    clustered = clustered_rows(pairing.rows, cell_margin, ni_alpha)
    k = sampling["samples_per_question"] or 1
    pairing.notes.append(sampling["line"])
    if k > 1:
        if plan is not None:
            raise InputError(
                f"--plan on sampled runs with k = {k} samples per question: a plan's decision is made on "
                "exact paired tests of one answer per question; compare without --plan (the clustered "
                "verdicts) or run with --samples-per-question 1"
            )
        apply_clustered_verdicts(rows, clustered)
        pairing.notes.append(
            f"the k = {k} samples of a question are correlated: each row's verdict (and the gate) comes "
            "from the clustered analysis by question; the per-sample counts and p-values are descriptive"
        )
    return {"sampling": sampling, "clustered": clustered}


def build_report(
    baseline: RunData,
    candidate: RunData,
    *,
    margin: float | str | Margins = 0.01,
    intersection: bool = False,
    allow_prompt_mismatch: bool = False,
    fail_on: str | None = None,
    labels: tuple[str | None, str | None] = (None, None),
    logprob_margin: float = DEFAULT_LOGPROB_MARGIN,
    replicate: RunData | None = None,
    gate_on: str = "exact_match",
    plan: Plan | None = None,
) -> dict[str, Any]:
    """With a `plan`, its margins, α and gate replace `margin`, `logprob_margin` and `fail_on`."""
    margins = margin if isinstance(margin, Margins) else parse_margins(margin)
    sampling = sampling_report(baseline, candidate)  # None: two greedy runs
    pairing = pair_runs(
        baseline, candidate, intersection=intersection, allow_prompt_mismatch=allow_prompt_mismatch
    )
    if plan is not None:
        check_plan_matches(plan, list(pairing.rows), [baseline, candidate])
    else:
        check_tasks(margins, pairing.tasks)

    def cell_margin(task: str, length: int | None) -> float:
        cell = plan.cell(task, length) if plan is not None else None
        return cell.em_margin if cell is not None else margins.for_task(task)

    ni_alpha = plan.alpha if plan is not None else 0.025
    rows = [
        compute_row(task, metric, length, pairs, margin=cell_margin(task, length), ni_alpha=ni_alpha)
        for (task, metric, length), pairs in pairing.rows.items()
    ]
    add_holm(rows)
    for row in rows:
        row["verdict"], row["verdict_text"] = row_verdict(row)
    sampled = _sampled_part(sampling, pairing, rows, cell_margin, ni_alpha, plan)
    lp_margins = None if plan is None else {c.key: c.logprob_margin for c in plan.cells}
    # a sampled run measures the reference answer once per question, with its sample 0
    first = {key: [p for p in pairs if not p.sample] for key, pairs in pairing.rows.items()}
    logprob = logprob_report(first, logprob_margin, lp_margins)
    aa = replicate_report(
        baseline,
        replicate,
        pairing.rows,
        intersection=intersection,
        allow_prompt_mismatch=allow_prompt_mismatch,
    )
    if plan is None:
        gate = evaluate_gate(rows, fail_on, measure=gate_on, logprob_cells=logprob["cells"])
        decision = {"preregistered": False, "plan": None, "line": NOT_PREREGISTERED}
    else:
        decision = decide(rows, logprob["cells"], plan, aa)
        gate = {
            "fail_on": "plan",
            "measure": plan.gate,
            "status": decision["outcome"],
            "failing": decision["failing"],
        }
    base, cand = describe(baseline), describe(candidate)
    short = short_labels(baseline, candidate)
    base["label"] = labels[0] or short[0]
    cand["label"] = labels[1] or short[1]
    return {
        "schema_version": SCHEMA_VERSION,
        "status": gate["status"],
        "outcome": overall_outcome(rows),
        "gate": gate,
        "verdicts": list(VERDICTS),
        "baseline": base,
        "candidate": cand,
        "margin": margins.default,
        "margins": dict(margins.per_task),
        "alpha": 0.05,
        "noninferiority_alpha": 0.025,
        "confidence": 0.95,
        "rows": rows,
        "trends": length_trends(pairing.rows),
        "length_summary": length_summary(rows),
        "excluded": {
            "errors": pairing.errors_excluded,
            "only_in_baseline": pairing.only_in_baseline,
            "only_in_candidate": pairing.only_in_candidate,
            "prompt_mismatches": pairing.prompt_mismatches,
        },
        "notes": pairing.notes + overflow_notes(rows),
        "verdict": overall_verdict(rows),
        "decision": decision,
        "plan": decision["plan"],
        "logprob": logprob,
        "benefit": benefit_report(baseline.manifest, candidate.manifest),
        "item_scores": item_scores_report(pairing.rows),
        "aa": aa,
        **sampled,
    }
