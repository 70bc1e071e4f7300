"""Markdown rendering: a compact table a reviewer pastes on a pull request, the verdict in words,
trend tests for multi-length tasks, and the discordant question ids in collapsible blocks."""

from __future__ import annotations

from typing import Any

from evalkit.compare.benefit import benefit_markdown
from evalkit.compare.cell import CompareCell, cells_of
from evalkit.compare.clustered import clustered_markdown
from evalkit.compare.decision import decision_markdown
from evalkit.compare.effective_length import length_summary_markdown
from evalkit.compare.item_scores import item_scores_markdown
from evalkit.compare.logprob import logprob_markdown
from evalkit.compare.replicate import replicate_markdown
from evalkit.compare.verdict import LOSS, consistency_note, pp, where

MAX_IDS = 200  # ids listed per block before "... and N more"


def _acc(p: float, se: float | None) -> str:
    return f"{100 * p:.2f}" + ("" if se is None else f" ± {100 * se:.2f}")


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def _ids(ids: tuple[str, ...]) -> str:
    if not ids:
        return "none"
    shown = ", ".join(ids[:MAX_IDS])
    return shown + (f", ... and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")


def _mde(cell: CompareCell) -> str:
    if cell.mde is not None:
        return pp(cell.mde, False)
    return "none resolvable" if cell.discordance > 0 else "–"


def _ni_header(cells: list[CompareCell]) -> str:
    margins = {c.margin for c in cells}
    return f"NI p (δ={pp(margins.pop(), False)} pp)" if len(margins) == 1 else "NI p [δ pp]"


def _ni_cell(cell: CompareCell, per_row: bool) -> str:
    return _p(cell.noninferiority_p) + (f" [{pp(cell.margin, False)}]" if per_row else "")


def table_cells(
    report: dict[str, Any], rows: list[dict[str, Any]] | None = None
) -> tuple[list[str], list[str], list[list[str]]]:
    """The comparison table as header, column alignments and plain-text cells: one source for
    the Markdown table and the terminal table, so the two never disagree."""
    rows = report["rows"] if rows is None else rows
    cells = cells_of(rows)
    per_row_margin = len({c.margin for c in cells}) > 1
    base, cand = report["baseline"]["label"], report["candidate"]["label"]
    with_len = any(c.length is not None for c in cells)
    holm = len(cells) > 1
    head = (
        ["task", "metric"]
        + (["length"] if with_len else [])
        + [
            "n",
            f"{base} (base) %",
            f"{cand} (cand) %",
            "Δ cand−base pp [95% CI]",
            "base-only / cand-only",
            "mid-p" + (" (Holm)" if holm else ""),
            "exact p",
            _ni_header(cells),
            "MDE pp",
            "verdict",
        ]
    )
    align = (
        ["---", "---"]
        + (["---:"] if with_len else [])
        + ["---:"] * 3
        + ["---", "---:", "---:", "---:", "---:", "---:", "---"]
    )
    body = []
    for row, c in zip(rows, cells):
        midp = _p(c.mcnemar_midp) + (f" ({_p(c.mcnemar_midp_holm)})" if holm else "")
        body.append(
            [c.task, c.metric]
            + ([str(c.length or "–")] if with_len else [])
            + [
                str(c.n),
                _acc(c.acc_baseline, c.stderr_baseline),
                _acc(c.acc_candidate, c.stderr_candidate),
                f"{pp(c.diff)} [{pp(c.diff_ci_low)}, {pp(c.diff_ci_high)}]"
                + ("†" if consistency_note(row) else ""),
                f"{c.baseline_only} / {c.candidate_only}",
                midp,
                _p(c.mcnemar_exact_p),
                _ni_cell(c, per_row_margin),
                _mde(c),
                str(c.verdict),
            ]
        )
    return head, align, body


def _table(report: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> list[str]:
    head, align, body = table_cells(report, rows)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for cells in body:
        if cells[-1] == LOSS:
            cells = cells[:-1] + [f"**{LOSS}**"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _trends(report: dict[str, Any]) -> list[str]:
    if not report["trends"]:
        return []
    lines = [
        "",
        "**Length trend** (does the gap change with context length?)",
        "",
        "| task | metric | lengths | arm×log₂len (clustered GLM) | discordant-only logistic | "
        "Cochran–Armitage on discordance |",
        "|---|---|---|---|---|---|",
    ]
    for t in report["trends"]:

        def fit(d: dict[str, Any]) -> str:
            if d["pvalue"] is None:
                return d["note"] or "–"
            return f"{d['coef']:+.3f} ± {d['stderr']:.3f} /doubling, p {_p(d['pvalue'])}"

        ca = t["cochran_armitage_discordance"]
        ca_text = ca["note"] if ca["note"] else f"z {ca['statistic']:+.2f}, p {_p(ca['pvalue'])}"
        disc = ", ".join(f"{d}/{n}" for d, n in zip(t["discordant_per_length"], t["n_per_length"]))
        lines.append(
            f"| {t['task']} | {t['metric']} | {', '.join(map(str, t['lengths']))} "
            f"(discordant {disc}) | {fit(t['logistic_arm_x_log2len'])} | "
            f"{fit(t['conditional_logistic'])} | {ca_text} |"
        )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    base, cand = report["baseline"], report["candidate"]
    lines = [f"### evalkit compare: candidate `{cand['label']}` vs baseline `{base['label']}`", ""]
    if "decision" in report:
        lines += decision_markdown(report["decision"])
    lines += _table(report)
    lines += ["", f"**Verdict:** {report['verdict']}", ""]
    rows = report["rows"]
    for row, c in zip(rows, cells_of(rows)):
        lines.append(f"- {where(row)}: {c.verdict_text}")
    lines += clustered_markdown(report)
    lines += _trends(report)
    if "length_summary" in report:
        lines += length_summary_markdown(report["length_summary"], base["label"], cand["label"])
    if "logprob" in report:
        lines += logprob_markdown(report["logprob"])
    lines += item_scores_markdown(report.get("item_scores") or [])
    if "aa" in report:
        lines += replicate_markdown(report["aa"])
    lines += benefit_markdown(report.get("benefit"))
    if report["notes"]:
        lines += [""] + [f"> {note}" for note in report["notes"]]
    lines.append("")
    for row, c in zip(rows, cells_of(rows)):
        if not (c.baseline_only_ids or c.candidate_only_ids):
            continue
        lines += [
            f"<details><summary>Discordant questions, {where(row)}: {c.baseline_only} baseline-only, "
            f"{c.candidate_only} candidate-only</summary>",
            "",
            f"- baseline-only right: {_ids(c.baseline_only_ids)}",
            f"- candidate-only right: {_ids(c.candidate_only_ids)}",
            "",
            "</details>",
        ]
    lines += [
        "",
        f"<sub>Accuracy ± lm-eval stderr √(p(1−p)/(n−1)). Δ with Tango score 95% CI († where it and "
        f"the mid-p disagree about 0: the mid-p governs). McNemar mid-p "
        f"(primary) and exact (conservative), two-sided; Holm across rows. NI: Tango/Nam score test of "
        f"Δ ≤ −δ, one-sided α 0.025. MDE: Connor, 80% power, α 0.05. "
        f"Baseline {base['path']} ({base['kind']}), candidate {cand['path']} ({cand['kind']}).</sub>",
    ]
    return "\n".join(lines) + "\n"
