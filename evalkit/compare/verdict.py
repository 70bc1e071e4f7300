"""Verdicts: one enum value per row (what a reviewer or a CI gate may conclude) and the words for it.

Significance comes from the Holm-adjusted McNemar mid-p (two-sided, 0.05); "not worse" from the
Tango/Nam non-inferiority test at the row's margin (one-sided 0.025, i.e. the 95% Tango CI's
lower end above -margin). The mid-p test and the Tango interval come from different statistics
(exact conditional vs asymptotic score) and can disagree at small counts (b = 4, c = 0: mid-p
0.0625, CI excluding 0); the row then says that the mid-p governs the verdict, and why.
"""

from __future__ import annotations

from typing import Any

ALPHA = 0.05

# Row verdicts, worst first. `identical`: no discordant question (whether non-inferiority is
# shown is the row's separate `noninferior` field).
LOSS, MINOR_LOSS, INCONCLUSIVE, NONINFERIOR, GAIN, IDENTICAL = (
    "loss",
    "minor_loss",
    "inconclusive",
    "noninferior",
    "gain",
    "identical",
)
VERDICTS = (LOSS, MINOR_LOSS, INCONCLUSIVE, NONINFERIOR, GAIN, IDENTICAL)


def pp(x: float, signed: bool = True) -> str:
    return f"{100 * x:+.2f}" if signed else f"{100 * x:.2f}"


def where(row: dict[str, Any]) -> str:
    length = "" if row["length"] is None else f" @ {row['length']}"
    return f"{row['task']} {row['metric']}{length}"


def _significant(row: dict[str, Any]) -> bool:
    holm = row["mcnemar_midp_holm"]
    return (holm if holm is not None else row["mcnemar_midp"]) < ALPHA


def row_verdict_label(row: dict[str, Any]) -> str:
    if row["baseline_only"] == 0 and row["candidate_only"] == 0:
        return IDENTICAL
    sig = _significant(row)
    if sig and row["diff"] < 0:
        return MINOR_LOSS if row["noninferior"] else LOSS
    if sig and row["diff"] > 0:
        return GAIN
    return NONINFERIOR if row["noninferior"] else INCONCLUSIVE


def consistency_note(row: dict[str, Any]) -> str:
    """Empty when the mid-p test and the 95% Tango CI agree about 0; else which governs and why."""
    ci_excludes_0 = row["diff_ci_low"] > 0 or row["diff_ci_high"] < 0
    midp_rejects = row["mcnemar_midp"] < ALPHA
    if ci_excludes_0 == midp_rejects:
        return ""
    asym = row["mcnemar_asymptotic_p"]
    if ci_excludes_0:
        return (
            f"The 95% CI excludes 0 but the mid-p test does not reject: the CI inverts the asymptotic "
            f"score test (p = {asym:.3g}), which runs above its nominal level with "
            f"{row['baseline_only'] + row['candidate_only']} discordant questions; the verdict follows "
            f"the mid-p test."
        )
    return (
        f"The mid-p test rejects but the 95% CI includes 0 (asymptotic score p = {asym:.3g}): the "
        f"verdict follows the mid-p test, which holds its level at small counts; the CI is the "
        f"conservative description of the size."
    )


def _resolve_text(row: dict[str, Any]) -> str:
    if row["mde"] is not None:
        return f" Differences below {pp(row['mde'], False)} pp are not resolvable at n = {row['n']}."
    if row["discordance"] > 0:
        return (
            f" No difference is resolvable at n = {row['n']}: even a gap as large as the discordance "
            f"rate ({pp(row['discordance'], False)} pp) would be detected with less than 80% power."
        )
    return ""


def row_verdict(row: dict[str, Any]) -> tuple[str, str]:
    """(verdict enum value, sentence) for one row."""
    label = row_verdict_label(row)
    holm = row["mcnemar_midp_holm"]
    shown_holm = holm is not None and holm != row["mcnemar_midp"]
    ptext = f"mid-p {row['mcnemar_midp']:.3g}" + (f", Holm {holm:.3g}" if shown_holm else "")
    diff, lo, hi, m = row["diff"], row["diff_ci_low"], row["diff_ci_high"], row["margin"]
    effect = f"{pp(diff)} pp (95% CI {pp(lo)} to {pp(hi)} pp)"
    nip = f"non-inferiority p = {row['noninferiority_p']:.3g}"
    if label == IDENTICAL:
        ni = (
            f"non-inferior at {pp(m, False)} pp ({nip})"
            if row["noninferior"]
            else f"non-inferiority at {pp(m, False)} pp not shown ({nip}): the 95% CI still spans "
            f"{pp(lo)} to {pp(hi)} pp at n = {row['n']}"
        )
        text = f"the arms agree on every one of the {row['n']} questions (0 discordant); {ni}."
    elif label in (LOSS, MINOR_LOSS):
        tail = (
            f"but by less than the {pp(m, False)} pp margin ({nip})"
            if label == MINOR_LOSS
            else f"and not shown to be within the {pp(m, False)} pp margin"
        )
        text = f"candidate is significantly lower: {effect}, {ptext}, {tail}."
    elif label == NONINFERIOR or (label == GAIN and row["noninferior"]):
        text = f"candidate is not worse than baseline by {pp(m, False)} pp or more ({nip}); {effect}" + (
            f"; significantly higher ({ptext})." if label == GAIN else f"; {ptext}."
        )
    else:
        sig = "significantly higher" if label == GAIN else "no significant difference"
        sigtext = f"{sig} ({ptext})"
        text = (
            f"{sigtext}; {effect}; non-inferiority at {pp(m, False)} pp not shown "
            f"({nip}): the candidate is not worse by more than {pp(-lo, False)} pp (95% confidence)."
            + _resolve_text(row)
        )
    note = consistency_note(row)
    return label, text + (f" {note}" if note else "")


def overall_outcome(rows: list[dict[str, Any]]) -> str:
    """The worst row verdict: loss > inconclusive > minor_loss > noninferior > gain > identical."""
    labels = {r["verdict"] for r in rows}
    for label in (LOSS, INCONCLUSIVE, MINOR_LOSS, NONINFERIOR, GAIN):
        if label in labels:
            return label
    return IDENTICAL


def _margins_text(rows: list[dict[str, Any]]) -> str:
    margins = sorted({r["margin"] for r in rows})
    return f"{pp(margins[0], False)} pp" if len(margins) == 1 else "each task's margin"


def _names(rows: list[dict[str, Any]]) -> str:
    return ", ".join(where(r) for r in rows)


def overall_verdict(rows: list[dict[str, Any]]) -> str:
    outcome = overall_outcome(rows)
    if outcome == LOSS:
        worse = [r for r in rows if r["verdict"] == LOSS]
        return (
            "Candidate is WORSE than baseline on "
            + "; ".join(f"{where(r)} ({pp(r['diff'])} pp, mid-p {r['mcnemar_midp_holm']:.3g})" for r in worse)
            + "."
        )
    unclear = [r for r in rows if not r["noninferior"] and r["verdict"] != GAIN]
    if outcome == INCONCLUSIVE:
        return (
            f"Inconclusive: no significant loss, but non-inferiority at {_margins_text(unclear)} is not "
            f"shown for {_names(unclear)}; more questions (or a smaller discordance) are needed to settle it."
        )
    small_identical = [r for r in unclear if r["verdict"] == IDENTICAL]
    if outcome == IDENTICAL:
        text = "The arms agree on every question of every row (0 discordant)"
        if not small_identical:
            return f"{text}; non-inferior at {_margins_text(rows)} on every row."
        return (
            f"{text}, but with so few questions non-inferiority at {_margins_text(small_identical)} is not "
            f"shown for {_names(small_identical)}; more questions are needed to show it."
        )
    if outcome == MINOR_LOSS:
        text = (
            f"Candidate is non-inferior at {_margins_text(rows)} on every row that changed, with a small "
            f"significant drop on {_names([r for r in rows if r['verdict'] == MINOR_LOSS])}."
        )
    elif outcome == GAIN:
        text = f"Candidate is significantly better on {_names([r for r in rows if r['verdict'] == GAIN])}."
    else:
        text = (
            f"Candidate is non-inferior to baseline (margin {_margins_text(rows)}) on every row that changed."
        )
    if small_identical:
        text += (
            f" No question changed on {_names(small_identical)}, but too few questions to show "
            f"non-inferiority there."
        )
    return text
