"""Verdicts in words: what a reviewer may conclude from each row, and from the whole report.

Significance comes from the Holm-adjusted mid-p (two-sided, 0.05); "not worse" from the
Tango/Nam non-inferiority test at the margin (one-sided 0.025, i.e. the 95% Tango CI's lower
end above -margin).
"""

from __future__ import annotations

from typing import Any

ALPHA = 0.05


def pp(x: float, signed: bool = True) -> str:
    return f"{100 * x:+.2f}" if signed else f"{100 * x:.2f}"


def _where(row: dict[str, Any]) -> str:
    length = "" if row["length"] is None else f" @ {row['length']}"
    return f"{row['task']} {row['metric']}{length}"


def row_verdict(row: dict[str, Any]) -> tuple[str, str]:
    """(short label, sentence) for one row."""
    holm = row["mcnemar_midp_holm"]
    p = holm if holm is not None else row["mcnemar_midp"]
    sig = p < ALPHA
    shown_holm = holm is not None and holm != row["mcnemar_midp"]
    ptext = f"mid-p {row['mcnemar_midp']:.3g}" + (f", Holm {holm:.3g}" if shown_holm else "")
    diff, lo, hi, m = row["diff"], row["diff_ci_low"], row["diff_ci_high"], row["margin"]
    effect = f"{pp(diff)} pp (95% CI {pp(lo)} to {pp(hi)} pp)"
    if sig and diff < 0:
        label = "worse, within margin" if row["noninferior"] else "WORSE"
        tail = (
            f"but by less than the {pp(m, False)} pp margin (non-inferiority p = "
            f"{row['noninferiority_p']:.3g})"
            if row["noninferior"]
            else f"and not shown to be within the {pp(m, False)} pp margin"
        )
        text = f"candidate is significantly lower: {effect}, {ptext}, {tail}."
    elif row["noninferior"]:
        label = "better" if sig else "non-inferior"
        text = (
            f"candidate is not worse than baseline by {pp(m, False)} pp or more (non-inferiority "
            f"p = {row['noninferiority_p']:.3g}); {effect}"
            + (f"; significantly higher ({ptext})." if sig else ".")
        )
    else:
        label = "better, margin not shown" if sig and diff > 0 else "inconclusive"
        resolve = (
            f" Differences below {pp(row['mde'], False)} pp are not resolvable at n = {row['n']}."
            if row["mde"] is not None
            else ""
        )
        sigtext = f"significantly higher ({ptext})" if sig else f"no significant difference ({ptext})"
        text = (
            f"{sigtext}; {effect}; non-inferiority at {pp(m, False)} pp not shown (p = "
            f"{row['noninferiority_p']:.3g}): the candidate is not worse by more than "
            f"{pp(-lo, False)} pp (95% confidence).{resolve}"
        )
    return label, text


def overall_verdict(rows: list[dict[str, Any]], margin: float) -> str:
    worse = [r for r in rows if r["verdict"] == "WORSE"]
    small = [r for r in rows if r["verdict"] == "worse, within margin"]
    unclear = [r for r in rows if r["verdict"] in ("inconclusive", "better, margin not shown")]
    if worse:
        return (
            "Candidate is WORSE than baseline on "
            + "; ".join(
                f"{_where(r)} ({pp(r['diff'])} pp, mid-p {r['mcnemar_midp_holm']:.3g})" for r in worse
            )
            + "."
        )
    if unclear:
        names = ", ".join(_where(r) for r in unclear)
        return (
            f"Inconclusive: no significant loss, but non-inferiority at {pp(margin, False)} pp is not "
            f"shown for {names}; more questions (or a smaller discordance) are needed to settle it."
        )
    if small:
        return (
            f"Candidate is non-inferior at {pp(margin, False)} pp on every row, with a small significant "
            f"drop on " + ", ".join(_where(r) for r in small) + "."
        )
    return f"Candidate is non-inferior to baseline (margin {pp(margin, False)} pp) on every row."
