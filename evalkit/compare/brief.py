"""`--brief`: a Markdown report sized for a pull-request comment or `$GITHUB_STEP_SUMMARY`.

The verdict and gate first, then the rows that matter (loss, minor loss, inconclusive, gain) as a
table and a text forest plot, then collapsible detail. Sections are added in that order while they
fit in `max_chars` (GitHub rejects comments above 65,536 characters); whatever does not fit is
counted in one line pointing at the full report.
"""

from __future__ import annotations

from typing import Any

from evalkit.compare.cell import cells_of
from evalkit.compare.forest import text_forest
from evalkit.compare.logprob import logprob_markdown
from evalkit.compare.markdown import _ids, _table
from evalkit.compare.replicate import replicate_markdown
from evalkit.compare.verdict import GAIN, IDENTICAL, INCONCLUSIVE, LOSS, MINOR_LOSS, VERDICTS, where

MATTER = (LOSS, MINOR_LOSS, INCONCLUSIVE, GAIN)
_ORDER = {v: i for i, v in enumerate(VERDICTS)}
_RESERVE = 400  # room kept for the closing lines


def _status_line(report: dict[str, Any]) -> str:
    gate = report["gate"]
    if gate["fail_on"] is None:
        return f"Outcome: **{report['outcome']}** (no gate: pass `--fail-on` to make CI fail on it)."
    name = f"--fail-on {gate['fail_on']}" + (
        "" if gate.get("measure", "exact_match") == "exact_match" else f" --gate-on {gate['measure']}"
    )
    if gate["status"] == "pass":
        return f"Gate `{name}`: **pass** (outcome: {report['outcome']})."
    return f"Gate `{name}`: **FAIL** on {len(gate['failing'])} row(s) (outcome: {report['outcome']})."


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.size = 0
        self.left_out: list[str] = []

    def fits(self, lines: list[str]) -> bool:
        return self.size + sum(len(x) + 1 for x in lines) <= self.limit - _RESERVE

    def add(self, lines: list[str], what: str = "") -> bool:
        if not self.fits(lines):
            if what:
                self.left_out.append(what)
            return False
        self.lines += lines
        self.size += sum(len(x) + 1 for x in lines)
        return True


def _matter_table(report: dict[str, Any], rows: list[dict[str, Any]], budget: _Budget) -> None:
    """As many of the rows that matter as fit, worst first."""
    shown: list[dict[str, Any]] = []
    for row in rows:
        if not budget.fits(_table(report, shown + [row]) + [""] * 2):
            break
        shown.append(row)
    if shown:
        budget.add(_table(report, shown))
    if len(shown) < len(rows):
        budget.left_out.append(f"{len(rows) - len(shown)} more row(s) that matter")


def render_brief(report: dict[str, Any], max_chars: int = 60_000) -> str:
    base, cand = report["baseline"]["label"], report["candidate"]["label"]
    rows = report["rows"]
    pairs = list(zip(rows, cells_of(rows)))
    matter_pairs = sorted((p for p in pairs if p[1].verdict in MATTER), key=lambda p: _ORDER[p[1].verdict])
    matter = [row for row, _ in matter_pairs]
    others = [c for _, c in pairs if c.verdict not in MATTER]
    budget = _Budget(max_chars)
    budget.add(
        [
            f"### evalkit compare: candidate `{cand}` vs baseline `{base}`",
            "",
            *([report["decision"]["line"][:2000], ""] if "decision" in report else []),
            _status_line(report),
            "",
            f"**Verdict:** {report['verdict'][:2000]}",
            "",
        ]
    )
    counts = ", ".join(
        f"{sum(c.verdict == v for c in others)} {v}"
        for v in (IDENTICAL, "noninferior")
        if any(c.verdict == v for c in others)
    )
    if matter:
        _matter_table(report, matter, budget)
    others_text = f"; the others: {counts}." if counts else "."
    budget.add(["", f"{len(matter)} of {len(rows)} rows matter{others_text}"])
    if matter:
        budget.add(["", "```text", *text_forest(matter), "```"], "the text forest plot")
    if "logprob" in report:
        budget.add(logprob_markdown(report["logprob"]), "the paired log-probability table")
    if "aa" in report:
        budget.add(replicate_markdown(report["aa"]), "the A/A table")
    if len(matter) < len(rows):
        detail = ["", "<details><summary>Every row</summary>", "", *_table(report), "", "</details>"]
        budget.add(detail, "the table of every row")
    sentences = [f"- {where(row)}: {c.verdict_text}" for row, c in matter_pairs]
    if sentences:
        budget.add(
            ["", "<details><summary>What each row that matters says</summary>", ""]
            + [*sentences, "", "</details>"],
            "the per-row explanations",
        )
    for row, c in matter_pairs:
        if c.baseline_only_ids or c.candidate_only_ids:
            budget.add(
                [
                    "",
                    f"<details><summary>Discordant questions, {where(row)}</summary>",
                    "",
                    f"- baseline-only right: {_ids(c.baseline_only_ids)}",
                    f"- candidate-only right: {_ids(c.candidate_only_ids)}",
                    "",
                    "</details>",
                ],
                f"discordant ids of {where(row)}",
            )
    tail = [""]
    if budget.left_out:
        shown = "; ".join(budget.left_out[:3]) + (
            f"; and {len(budget.left_out) - 3} more" if len(budget.left_out) > 3 else ""
        )
        tail.append(f"<sub>Left out to stay under {max_chars} characters: {shown}.</sub>")
    tail.append(
        f"<sub>McNemar mid-p (Holm), Tango 95% CI, Tango/Nam non-inferiority; evalkit compare "
        f"schema {report['schema_version']}.</sub>"
    )
    return "\n".join(budget.lines + tail) + "\n"
