"""The pre-registered decision of `evalkit compare --plan`: every cell judged against the plan.

- Intersection-union (Berger 1982): the plan passes only when every cell shows non-inferiority on
  the gated measures at the plan's α; no multiplicity adjustment is needed for that, and no gain
  in one cell can offset a loss in another (cells are never pooled for the decision).
- A cell whose baseline is at the floor (accuracy <= plan floor) cannot lose, so agreement there
  says nothing: it is labelled "cannot lose" and the plan cannot pass on it. A cell at the
  ceiling is labelled "cannot gain"; it is still judged, since a loss there stays observable.
- Claims of a significant loss use the exact conditional McNemar p (valid at every discordant
  count), Holm-adjusted over the plan's declared family; hypotheses of the family not in this
  comparison count as p = 1, which can only make the adjustment more conservative. The mid-p is
  shown as descriptive.
- A pooled summary, stratified by cell (Mantel-Haenszel / stratified McNemar), is descriptive
  only and lists the cells that lost and gained apart.
"""

from __future__ import annotations

import math
from typing import Any

from evalkit import stats as st
from evalkit.compare.pairing import RowKey
from evalkit.compare.plan_file import Plan
from evalkit.compare.verdict import pp
from evalkit.errors import InputError

PASS, FAIL = "pass", "fail"
NONINFERIOR, LOSS, NOT_SHOWN, CANNOT_LOSE = "noninferior", "loss", "not_shown", "cannot_lose"
CANNOT_GAIN = "cannot_gain"

NOT_PREREGISTERED = (
    "Margins were not pre-registered (no `--plan`): the verdicts below use margins chosen at compare "
    "time; write a plan before the runs with `evalkit plan ... --out plan.yaml`."
)


def _name(task: str, length: int | None) -> str:
    return task + ("" if length is None else f" @ {length}")


def _row_name(row: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """'task @ length', with the metric when the cell has more than one."""
    metrics = {r["metric"] for r in rows if (r["task"], r["length"]) == (row["task"], row["length"])}
    if len(metrics) > 1:
        return _name(f"{row['task']} {row['metric']}", row["length"])
    return _name(row["task"], row["length"])


def _one_metric_per_cell(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for r in rows:
        if (r["task"], r["length"]) not in seen:
            seen.add((r["task"], r["length"]))
            out.append(r)
    return out


def check_plan_matches(plan: Plan, keys: list[RowKey], runs: list[Any]) -> None:
    """InputError (one line) when the runs' cells or recorded plan hash differ from the plan."""
    have = {(task, length) for task, _metric, length in keys}
    want = {c.key for c in plan.cells}
    extra, missing = sorted(have - want, key=str), sorted(want - have, key=str)
    if extra or missing:
        parts = []
        if missing:
            parts.append("the plan's cells not in the runs: " + ", ".join(_name(*k) for k in missing))
        if extra:
            parts.append("cells of the runs not in the plan: " + ", ".join(_name(*k) for k in extra))
        raise InputError(f"{plan.path} does not match the runs: " + "; ".join(parts))
    for run in runs:
        recorded = run.manifest.get("plan") if isinstance(run.manifest, dict) else None
        if isinstance(recorded, dict) and recorded.get("content_hash") != plan.content_hash:
            raise InputError(
                f"{plan.path}: its hash {plan.content_hash[:19]}… differs from the plan {run.path} was run "
                f"with ({str(recorded.get('content_hash'))[:19]}…): the plan changed after the runs started"
            )


def _holm_over_family(pvalues: list[float], size: int) -> list[float]:
    padded = pvalues + [1.0] * max(0, size - len(pvalues))
    return list(st.holm(padded).adjusted[: len(pvalues)])


def stratified_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stratified McNemar over cells: Z = sum(b - c) / sqrt(sum(b + c)); MH discordant odds ratio.

    One metric per task x length (the first): the metrics of a cell score the same questions."""
    rows = _one_metric_per_cell(rows)
    b = sum(r["candidate_only"] for r in rows)
    c = sum(r["baseline_only"] for r in rows)
    z = (b - c) / math.sqrt(b + c) if b + c else 0.0
    return {
        "candidate_only": b,
        "baseline_only": c,
        "z": z,
        "pvalue": math.erfc(abs(z) / math.sqrt(2.0)),  # two-sided normal
        "mh_odds_ratio": (b / c) if c else None,
        "cells_with_losses": [_name(r["task"], r["length"]) for r in rows if r["diff"] < 0],
        "cells_with_gains": [_name(r["task"], r["length"]) for r in rows if r["diff"] > 0],
        "note": "descriptive only: the decision is per cell (a pooled mean can hide a loss)",
    }


def _logprob_by_cell(cells: list[dict[str, Any]]) -> dict[tuple[str, int | None], dict[str, Any]]:
    return {(c["task"], c["length"]): c for c in cells}


def _logprob_noninferior(lp: dict[str, Any]) -> bool:
    """The pre-stated primary analysis decides (robust_paired); the t-test only with < 3 questions."""
    robust = lp.get("robust")
    return bool(robust["noninferior"] if robust else lp["noninferior"])


def _robust_text(lp: dict[str, Any]) -> str:
    robust = lp.get("robust")
    if not robust:
        return f"t-test NI p {lp['noninferiority_p']:.3g}"
    return (
        f"{robust['method']} ({robust['reason']}): estimate {robust['estimate']:+.4f}, "
        f"lower bound {robust['lower_bound']:+.4f}"
    )


def _judge(row: dict[str, Any], plan: Plan, lp: dict[str, Any] | None, name: str) -> dict[str, Any]:
    cell = plan.cell(row["task"], row["length"])
    assert cell is not None  # checked by check_plan_matches
    boundary = None
    if row["acc_baseline"] <= plan.floor:
        boundary = CANNOT_LOSE
    elif row["acc_baseline"] >= plan.ceiling:
        boundary = CANNOT_GAIN
    gated_em = plan.gate in ("exact_match", "both")
    gated_lp = plan.gate in ("logprob", "both")
    if gated_lp and lp is None:
        raise InputError(
            f"{plan.path} gates on logprob but the runs recorded no paired gold_logprob for {name}"
        )
    reasons = []
    significant_loss = row["diff"] < 0 and row["loss_p_exact_holm"] <= plan.loss_alpha
    if significant_loss:
        verdict = LOSS
        reasons.append(
            f"exact-match loss {pp(row['diff'])} pp (exact p {row['mcnemar_exact_p']:.3g}, "
            f"Holm over {plan.family_size} {row['loss_p_exact_holm']:.3g})"
        )
    elif boundary == CANNOT_LOSE:
        verdict = CANNOT_LOSE
        reasons.append(
            f"baseline at the floor ({pp(row['acc_baseline'], False)}% <= {pp(plan.floor, False)}%): "
            "the candidate cannot lose here, so agreement is no evidence"
        )
    else:
        shown = []
        if gated_em and not row["noninferior"]:
            shown.append(
                f"exact match not shown within {pp(cell.em_margin, False)} pp "
                f"(NI p {row['noninferiority_p']:.3g})"
            )
        if gated_lp and lp is not None and not _logprob_noninferior(lp):
            shown.append(f"log-prob not shown within {cell.logprob_margin:g} nats/token ({_robust_text(lp)})")
        verdict = NOT_SHOWN if shown else NONINFERIOR
        reasons += shown
    if cell.n is not None and row["n"] < cell.n:
        reasons.append(f"n {row['n']} < the planned {cell.n}")
    return {
        "task": row["task"],
        "metric": row["metric"],
        "length": row["length"],
        "name": name,
        "n": row["n"],
        "n_planned": cell.n,
        "boundary": boundary,
        "exact_match_margin": cell.em_margin,
        "logprob_margin": cell.logprob_margin,
        "diff": row["diff"],
        "diff_ci": [row["diff_ci_low"], row["diff_ci_high"]],
        "noninferiority_p": row["noninferiority_p"],
        "exact_match_noninferior": row["noninferior"],
        "loss_p_exact": row["mcnemar_exact_p"],
        "loss_p_exact_holm": row["loss_p_exact_holm"],
        "loss_midp_descriptive": row["mcnemar_midp"],
        "logprob_mean_diff": None if lp is None else lp["mean_diff"],
        "logprob_noninferiority_p": None if lp is None else lp["noninferiority_p"],
        "logprob_noninferior": None if lp is None else _logprob_noninferior(lp),
        "logprob_primary": None if lp is None else _robust_text(lp),
        "logprob_method": None if lp is None else (lp.get("robust") or {}).get("method", "t-test"),
        "verdict": verdict,
        "passes": verdict == NONINFERIOR,
        "reasons": reasons,
    }


def _floor_clause(aa: dict[str, Any] | None) -> str:
    rows = (aa or {}).get("rows") or []
    if not rows:
        return ""
    ab = sum(r["ab_discordant"] for r in rows)
    aa_n = sum(r["aa_discordant"] for r in rows)
    n = sum(r["n"] for r in rows)
    exceeding = [_name(r["task"], r["length"]) for r in rows if r["exceeds"]]
    tail = (
        f"exceeds the floor on {', '.join(exceeding)}"
        if exceeding
        else "no cell exceeds it (one-sided exact test, 0.05)"
    )
    return (
        f" Against the numerics floor: the candidate changes {ab} of {n} answers, "
        f"the floor run {aa_n}; {tail}."
    )


def decision_line(decision: dict[str, Any], aa: dict[str, Any] | None = None) -> str:
    plan = decision["plan"]
    head = f"Decision (plan `{plan['name']}`, {plan['content_hash'][:19]}…, gate {decision['gate']}):"
    cells = decision["cells"]
    if decision["outcome"] == PASS:
        body = f"PASS: every one of the {len(cells)} cells is non-inferior at its pre-registered margin."
    else:
        failing = [c for c in cells if not c["passes"]]
        groups = []
        for verdict, words in (
            (LOSS, "loss"),
            (NOT_SHOWN, "not shown"),
            (CANNOT_LOSE, "cannot lose (floor)"),
        ):
            names = [c["name"] for c in failing if c["verdict"] == verdict]
            if names:
                groups.append(f"{words}: {', '.join(names)}")
        body = f"FAIL: {len(failing)} of {len(cells)} cells do not pass ({'; '.join(groups)})."
    return f"{head} {body}{_floor_clause(aa)}"


def decide(
    rows: list[dict[str, Any]], logprob_cells: list[dict[str, Any]], plan: Plan, aa: dict[str, Any] | None
) -> dict[str, Any]:
    """Judge every row against its plan cell; adds `loss_p_exact_holm` to the rows (in place)."""
    size = max(plan.family_size, len(rows))
    for row, p in zip(rows, _holm_over_family([r["mcnemar_exact_p"] for r in rows], size)):
        row["loss_p_exact_holm"] = p
    lp = _logprob_by_cell(logprob_cells)
    cells = [_judge(r, plan, lp.get((r["task"], r["length"])), _row_name(r, rows)) for r in rows]
    decision = {
        "plan": plan.identity(),
        "preregistered": True,
        "gate": plan.gate,
        "rule": "intersection-union: every cell non-inferior; floor cells cannot pass",
        "alpha": plan.alpha,
        "loss_alpha": plan.loss_alpha,
        "family": {"procedure": plan.family_procedure, "size": size, "p_values": "exact conditional"},
        "outcome": PASS if all(c["passes"] for c in cells) else FAIL,
        "cells": cells,
        "failing": [c["name"] for c in cells if not c["passes"]],
        "pooled": stratified_summary(rows),
        "logprob_calibration": plan.calibration,
    }
    decision["line"] = decision_line(decision, aa)
    return decision


def _words(verdict: str) -> str:
    return {
        NONINFERIOR: "non-inferior",
        LOSS: "**loss**",
        NOT_SHOWN: "not shown",
        CANNOT_LOSE: "cannot lose",
    }[verdict]


def decision_markdown(decision: dict[str, Any]) -> list[str]:
    """The lines the report leads with: the decision, then (with a plan) every cell's verdict."""
    if not decision["preregistered"]:
        return [f"> {decision['line']}", ""]
    lines = [f"**{decision['line']}**", ""]
    lines += [
        "| cell | n (planned) | Δ exact match (95% CI) | margin | NI p | exact p (Holm) | mid-p | "
        "mean Δ log-prob nats/token; primary NI | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in decision["cells"]:
        lo, hi = c["diff_ci"]
        label = _words(c["verdict"]) + (" · cannot gain" if c["boundary"] == CANNOT_GAIN else "")
        lp = (
            "–"
            if c["logprob_mean_diff"] is None
            else f"{c['logprob_mean_diff']:+.4f}; {'NI' if c['logprob_noninferior'] else 'NI not shown'} "
            f"({c['logprob_method']})"
        )
        lines.append(
            f"| {c['name']} | {c['n']} ({c['n_planned'] or '–'}) | "
            f"{pp(c['diff'])} ({pp(lo)}, {pp(hi)}) | {pp(c['exact_match_margin'], False)} pp / "
            f"{c['logprob_margin']:g} | {c['noninferiority_p']:.3g} | {c['loss_p_exact']:.3g} "
            f"({c['loss_p_exact_holm']:.3g}) | {c['loss_midp_descriptive']:.3g} | {lp} | {label} |"
        )
    lines += [""] + [f"- {c['name']}: {'; '.join(c['reasons'])}." for c in decision["cells"] if c["reasons"]]
    pooled = decision["pooled"]
    calibration = decision.get("logprob_calibration")
    if calibration and isinstance(calibration.get("sentence"), str):
        lines += ["", f"Log-prob margin in accuracy terms: {calibration['sentence']}."]
    lines += [
        "",
        f"<sub>Pooled over cells, stratified McNemar (descriptive only): {pooled['candidate_only']} "
        f"candidate-only vs {pooled['baseline_only']} baseline-only right, z = {pooled['z']:+.2f}; cells "
        f"that lost: {', '.join(pooled['cells_with_losses']) or 'none'}; cells that gained: "
        f"{', '.join(pooled['cells_with_gains']) or 'none'}. Loss p: exact conditional McNemar (two-sided), "
        f"Holm over a family of {decision['family']['size']}; mid-p descriptive. NI: Tango/Nam, one-sided "
        f"α {decision['alpha']:g} per cell, no adjustment (intersection–union).</sub>",
        "",
    ]
    return lines
