"""The pre-registered decision of `evalkit compare --plan`: every cell judged against the plan.

- Intersection-union (Berger 1982): the plan passes only when every cell with room shows
  non-inferiority on the gated measures at the plan's α; no multiplicity adjustment is needed for
  that, and no gain in one cell can offset a loss in another (cells are never pooled).
- Cells at the floor or the ceiling have no room: at the floor (baseline accuracy <= plan floor)
  the candidate cannot lose, at the ceiling (>= plan ceiling) it cannot gain, and agreement there
  is no evidence of non-inferiority. Such a cell is labelled "cannot lose" / "ceiling: not
  evidence" and left out of the intersection (the decision line says how many and why); a
  significant loss found there still fails the plan. A plan with no cell with room cannot pass.
- Claims of a significant loss use the exact conditional McNemar p (valid at every discordant
  count), under the plan's family-wise procedure (`loss_family`: Holm over the declared family, or
  a pre-registered fixed sequence). The mid-p is shown as descriptive.
- A pooled summary, stratified by cell (Mantel-Haenszel / stratified McNemar), is descriptive
  only and lists the cells that lost and gained apart.
"""

from __future__ import annotations

import math
from typing import Any

from evalkit.compare.loss_family import NOT_TESTED, loss_family
from evalkit.compare.pairing import RowKey
from evalkit.compare.plan_file import Plan
from evalkit.compare.verdict import pp
from evalkit.errors import InputError

PASS, FAIL = "pass", "fail"
NONINFERIOR, LOSS, NOT_SHOWN, CANNOT_LOSE = "noninferior", "loss", "not_shown", "cannot_lose"
CANNOT_GAIN, CEILING = "cannot_gain", "ceiling_not_evidence"
NO_ROOM = (CANNOT_LOSE, CEILING)  # verdicts of cells left out of the intersection

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


def _judge(
    row: dict[str, Any],
    plan: Plan,
    lp: dict[str, Any] | None,
    name: str,
    loss: tuple[float, bool, str],
) -> dict[str, Any]:
    """loss: (adjusted exact p, a significant loss claimed, "tested" | "not tested")."""
    cell = plan.cell(row["task"], row["length"])
    assert cell is not None  # checked by check_plan_matches
    adjusted, significant_loss, loss_status = loss
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
    procedure = "Holm" if plan.family_procedure == "holm" else "fixed sequence"
    if significant_loss:
        verdict = LOSS
        reasons.append(
            f"exact-match loss {pp(row['diff'])} pp (exact p {row['mcnemar_exact_p']:.3g}, "
            f"{procedure} over {plan.family_size} {adjusted:.3g})"
        )
    elif boundary == CANNOT_LOSE:
        verdict = CANNOT_LOSE
        reasons.append(
            f"baseline at the floor ({pp(row['acc_baseline'], False)}% <= {pp(plan.floor, False)}%): "
            "the candidate cannot lose here, so agreement is no evidence"
        )
    elif boundary == CANNOT_GAIN:
        verdict = CEILING
        reasons.append(
            f"baseline at the ceiling ({pp(row['acc_baseline'], False)}% >= {pp(plan.ceiling, False)}%) "
            "and no significant loss: the candidate cannot gain here, so agreement is no evidence"
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
    if loss_status == NOT_TESTED:
        reasons.append("loss not tested (the fixed sequence stopped before this cell)")
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
        "loss_p_exact_adjusted": adjusted,
        "loss_test": loss_status,
        "loss_midp_descriptive": row["mcnemar_midp"],
        "logprob_mean_diff": None if lp is None else lp["mean_diff"],
        "logprob_noninferiority_p": None if lp is None else lp["noninferiority_p"],
        "logprob_noninferior": None if lp is None else _logprob_noninferior(lp),
        "logprob_primary": None if lp is None else _robust_text(lp),
        "logprob_method": None if lp is None else (lp.get("robust") or {}).get("method", "t-test"),
        "verdict": verdict,
        "passes": verdict == NONINFERIOR,
        "excluded": verdict in NO_ROOM,  # no room: left out of the intersection
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


def _excluded_clause(cells: list[dict[str, Any]]) -> str:
    """'2 cells excluded (cannot lose (floor): a; ceiling, not evidence: b)', or ''."""
    groups = []
    for verdict, words in ((CANNOT_LOSE, "cannot lose (floor)"), (CEILING, "ceiling, not evidence")):
        names = [c["name"] for c in cells if c["verdict"] == verdict]
        if names:
            groups.append(f"{words}: {', '.join(names)}")
    count = sum(c["excluded"] for c in cells)
    return f"{count} cell{'s' if count != 1 else ''} excluded ({'; '.join(groups)})" if count else ""


def decision_line(decision: dict[str, Any], aa: dict[str, Any] | None = None) -> str:
    plan = decision["plan"]
    head = f"Decision (plan `{plan['name']}`, {plan['content_hash'][:19]}…, gate {decision['gate']}):"
    cells = decision["cells"]
    room = [c for c in cells if not c["excluded"]]
    excluded = _excluded_clause(cells)
    if decision["outcome"] == PASS:
        which = (
            "the one cell with room" if len(room) == 1 else f"every one of the {len(room)} cells with room"
        )
        body = f"PASS: {which} is non-inferior at its pre-registered margin"
        body += f"; {excluded}." if excluded else "."
    elif not room:
        body = (
            f"FAIL: no cell has room ({excluded}): agreement at a floor or ceiling is no evidence "
            "of non-inferiority."
        )
    else:
        failing = [c for c in room if not c["passes"]]
        groups = []
        for verdict, words in ((LOSS, "loss"), (NOT_SHOWN, "not shown")):
            names = [c["name"] for c in failing if c["verdict"] == verdict]
            if names:
                groups.append(f"{words}: {', '.join(names)}")
        body = f"FAIL: {len(failing)} of {len(room)} cells with room do not pass ({'; '.join(groups)})"
        body += f"; {excluded}." if excluded else "."
    return f"{head} {body}{_floor_clause(aa)}"


def decide(
    rows: list[dict[str, Any]], logprob_cells: list[dict[str, Any]], plan: Plan, aa: dict[str, Any] | None
) -> dict[str, Any]:
    """Judge every row against its plan cell: the loss family first, then each cell's verdict."""
    size = max(plan.family_size, len(rows))
    names = [_name(r["task"], r["length"]) for r in rows]
    family = loss_family(
        names,
        [r["mcnemar_exact_p"] for r in rows],
        [r["diff"] < 0 for r in rows],
        plan.loss_alpha,
        procedure=plan.family_procedure,
        size=size,
        order=plan.family_order,
    )
    lp = _logprob_by_cell(logprob_cells)
    cells = [
        _judge(r, plan, lp.get((r["task"], r["length"])), _row_name(r, rows), loss)
        for r, loss in zip(rows, zip(family.adjusted, family.loss, family.status))
    ]
    # a loss fails wherever it is found; otherwise every cell with room must pass, and one must exist
    room = [c for c in cells if not c["excluded"]]
    passed = bool(room) and all(c["passes"] for c in room)
    decision = {
        "plan": plan.identity(),
        "preregistered": True,
        "gate": plan.gate,
        "rule": "intersection-union over the cells with room: every one non-inferior; floor and "
        "ceiling cells are no evidence (a loss there still fails); no cell with room cannot pass",
        "alpha": plan.alpha,
        "loss_alpha": plan.loss_alpha,
        "family": {
            "procedure": plan.family_procedure,
            "size": size,
            "order": list(plan.family_order) or None,
            "stopped_at": family.stopped_at,
            "p_values": "exact conditional",
        },
        "outcome": PASS if passed else FAIL,
        "cells": cells,
        "cells_with_room": len(room),
        "excluded": {
            "cannot_lose": [c["name"] for c in cells if c["verdict"] == CANNOT_LOSE],
            "ceiling_not_evidence": [c["name"] for c in cells if c["verdict"] == CEILING],
        },
        "failing": [c["name"] for c in cells if not c["passes"] and not c["excluded"]]
        or ([] if passed else [c["name"] for c in cells]),
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
        CEILING: "ceiling: not evidence",
    }[verdict]


def _family_words(family: dict[str, Any]) -> str:
    if family["procedure"] == "holm":
        return f"Holm over a family of {family['size']}"
    stop = f", stopped at {family['stopped_at']}" if family.get("stopped_at") else ""
    return f"fixed sequence {' → '.join(family['order'] or [])} at full α{stop}"


def decision_markdown(decision: dict[str, Any]) -> list[str]:
    """The lines the report leads with: the decision, then (with a plan) every cell's verdict."""
    if not decision["preregistered"]:
        return [f"> {decision['line']}", ""]
    lines = [f"**{decision['line']}**", ""]
    procedure = "Holm" if decision["family"]["procedure"] == "holm" else "fixed sequence"
    lines += [
        f"| cell | n (planned) | Δ exact match (95% CI) | margin | NI p | exact p ({procedure}) | mid-p | "
        "mean Δ log-prob nats/token; primary NI | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in decision["cells"]:
        lo, hi = c["diff_ci"]
        label = _words(c["verdict"]) + (
            " · cannot gain" if c["boundary"] == CANNOT_GAIN and c["verdict"] != CEILING else ""
        )
        adjusted = "not tested" if c["loss_test"] == NOT_TESTED else f"{c['loss_p_exact_adjusted']:.3g}"
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
            f"({adjusted}) | {c['loss_midp_descriptive']:.3g} | {lp} | {label} |"
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
        f"{_family_words(decision['family'])}; mid-p descriptive. NI: Tango/Nam, one-sided "
        f"α {decision['alpha']:g} per cell, no adjustment (intersection–union).</sub>",
        "",
    ]
    return lines
