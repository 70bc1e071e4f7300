"""The paired log-probability measure: does the model's confidence in the right answer move?

Per question and arm, `samples.jsonl` may carry `gold_logprob` (the reference answer's
log-probability, teacher-forced in decode mode), `gold_tokens`, `gold_min_margin` (the smallest
greedy margin logit(gold) - max other over the answer tokens: > 0 iff greedy reproduces the gold
answer) and `generated_ids`. Per task x length this reports, with d_i = candidate - baseline in
**nats per answer token** (each side's gold_logprob / gold_tokens):

- the mean of d with its t-interval and t-test (these decide the verdict, so they never disagree),
- the Wilcoxon signed-rank test with the Hodges-Lehmann estimate and signed-rank interval (the
  distribution-free check; the row says when it disagrees),
- the share of questions whose margin changes sign (greedy answer lost or gained),
- where the two generations first depart (token index), and
- non-inferiority: H0 mean d <= -margin (t-test, one-sided 0.025), margin in nats per answer token.

McNemar answers "do answers change"; this answers "does the confidence in the right answer move",
and has far more power because every question contributes, not only the discordant ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evalkit import stats as st
from evalkit.compare.pairing import Pair, RowKey
from evalkit.compare.verdict import GAIN, IDENTICAL, INCONCLUSIVE, LOSS, MINOR_LOSS, NONINFERIOR

UNIT = "nats per answer token"
DEFAULT_LOGPROB_MARGIN = 0.01
READ_ME = (
    "Which measure to read: exact-match McNemar answers “do answers change”; the paired "
    "log-probability answers “does the model's confidence in the right answer move”, with far more "
    "power (every question counts, not only the discordant ones)."
)


def _token_count(tokens: Any) -> int | None:
    """`gold_tokens` as runs store it: the answer's token ids (local engine) or token strings (a
    server's prompt log-probs), i.e. a list; a bare count is accepted too."""
    if isinstance(tokens, list):
        return len(tokens) or None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        return None
    return tokens


def _per_token(sample: dict[str, Any]) -> float | None:
    lp, tokens = sample.get("gold_logprob"), _token_count(sample.get("gold_tokens"))
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or not math.isfinite(lp):
        return None
    if tokens is None:
        return None
    return float(lp) / tokens


def _margin(sample: dict[str, Any]) -> float | None:
    m = sample.get("gold_min_margin")
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m):
        return None
    return float(m)


def _ids(sample: dict[str, Any]) -> list | None:
    ids = sample.get("generated_ids")
    return ids if isinstance(ids, list) else None


def first_departure(a: list, b: list) -> int | None:
    """Index of the first generated token where the two generations differ (None: identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _departures(pairs: list[Pair]) -> dict[str, Any]:
    compared, positions = 0, []
    for p in pairs:
        a, b = _ids(p.baseline_sample), _ids(p.candidate_sample)
        if a is None or b is None:
            continue
        compared += 1
        pos = first_departure(a, b)
        if pos is not None:
            positions.append(pos)
    out: dict[str, Any] = {
        "compared": compared,
        "identical": compared - len(positions),
        "departed": len(positions),
    }
    if positions:
        q = np.percentile(positions, [0, 25, 50, 75, 100])
        out.update(zip(("min", "q25", "median", "q75", "max"), (float(x) for x in q)))
    return out


def _sign_changes(pairs: list[Pair]) -> dict[str, Any]:
    lost = gained = compared = 0
    for p in pairs:
        mb, mc = _margin(p.baseline_sample), _margin(p.candidate_sample)
        if mb is None or mc is None:
            continue
        compared += 1
        lost += mb > 0 >= mc
        gained += mc > 0 >= mb
    share = (lost + gained) / compared if compared else None
    return {"compared": compared, "lost": lost, "gained": gained, "share": share}


def _verdict(mean: st.PairedMeanResult, ni: st.MeanNonInferiorityResult, all_zero: bool) -> str:
    if all_zero:
        return IDENTICAL
    if mean.ci_high < 0:
        return MINOR_LOSS if ni.noninferior else LOSS
    if mean.ci_low > 0:
        return GAIN
    return NONINFERIOR if ni.noninferior else INCONCLUSIVE


def logprob_cell(task: str, length: int | None, pairs: list[Pair], margin: float) -> dict[str, Any] | None:
    """The measure for one task x length cell, or None when no question has it on both sides."""
    diffs = []
    for p in pairs:
        b, c = _per_token(p.baseline_sample), _per_token(p.candidate_sample)
        if b is not None and c is not None:
            diffs.append(c - b)
    if not diffs:
        return None
    d = np.asarray(diffs)
    mean, sr = st.paired_mean(d), st.signed_rank(d)
    ni = st.noninferiority_mean(d, margin)
    from evalkit.stats.robust_paired import robust_noninferiority  # scipy: only when cells exist

    robust = robust_noninferiority(d, margin) if d.size >= 3 else None
    all_zero = not np.any(d)
    verdict = _verdict(mean, ni, all_zero)
    mean_sig, rank_sig = mean.pvalue < 0.05, sr.pvalue < 0.05
    return {
        "task": task,
        "length": length,
        "n": int(d.size),
        "missing": len(pairs) - int(d.size),
        "mean_diff": mean.mean,
        "mean_ci_low": mean.ci_low,
        "mean_ci_high": mean.ci_high,
        "t_pvalue": mean.pvalue,
        "hodges_lehmann": sr.hodges_lehmann,
        "hl_ci_low": sr.ci_low,
        "hl_ci_high": sr.ci_high,
        "hl_ci_method": sr.method,
        "wilcoxon_pvalue": sr.pvalue,
        "wilcoxon_agrees": mean_sig == rank_sig,
        "margin": margin,
        "noninferiority_p": ni.pvalue,
        "noninferior": ni.noninferior,
        # the primary NI analysis by the pre-stated tail rule (what a plan's decision reads)
        "robust": None if robust is None else robust.to_dict(),
        "margin_sign_changes": _sign_changes(pairs),
        "first_departure": _departures(pairs),
        "verdict": verdict,
    }


def _recorded(pairs: list[Pair]) -> bool:
    return any(
        "gold_logprob" in (p.baseline_sample or {}) or "gold_logprob" in (p.candidate_sample or {})
        for p in pairs
    )


def logprob_report(
    rows: dict[RowKey, list[Pair]],
    margin: float = DEFAULT_LOGPROB_MARGIN,
    cell_margins: dict[tuple[str, int | None], float] | None = None,
) -> dict[str, Any]:
    """{"recorded", "unit", "margin", "cells"}: one cell per task x length (questions, not metrics).

    cell_margins: a margin per (task, length) (a pre-registered plan's), overriding `margin`."""
    by_cell: dict[tuple[str, int | None], list[Pair]] = {}
    for (task, _metric, length), pairs in rows.items():
        by_cell.setdefault((task, length), pairs)  # every metric of a cell pairs the same questions
    recorded = any(_recorded(pairs) for pairs in by_cell.values())
    cells = []
    if recorded:
        for (task, length), pairs in by_cell.items():
            cell_margin = (cell_margins or {}).get((task, length), margin)
            cell = logprob_cell(task, length, pairs, cell_margin)
            if cell is not None:
                cells.append(cell)
    return {"recorded": recorded and bool(cells), "unit": UNIT, "margin": margin, "cells": cells}


def _nats(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:+.4f}"


def logprob_markdown(section: dict[str, Any]) -> list[str]:
    if not section["recorded"]:
        return [
            "",
            "Paired log-probability of the reference answer: not recorded (no `gold_logprob` on both "
            "sides of any question).",
        ]
    lines = [
        "",
        f"**Paired log-probability of the reference answer** (teacher-forced in decode mode; Δ "
        f"cand−base in {UNIT}; NI margin δ = {section['margin']:g} {UNIT})",
        "",
        f"> {READ_ME}",
        "",
        "| task | length | n | mean Δ [95% t CI] | Hodges–Lehmann [95% signed-rank CI] | Wilcoxon p | "
        "margin sign flips lost / gained | generations depart at token (median [IQR]; identical) | "
        "NI p | verdict |",
        "|---|---:|---:|---|---|---:|---:|---|---:|---|",
    ]
    for c in section["cells"]:
        sc, dep = c["margin_sign_changes"], c["first_departure"]
        flips = f"{sc['lost']} / {sc['gained']} of {sc['compared']}" if sc["compared"] else "not recorded"
        if not dep["compared"]:
            depart = "not recorded"
        elif dep["departed"]:
            depart = (
                f"{dep['median']:.0f} [{dep['q25']:.0f}–{dep['q75']:.0f}]; {dep['identical']} of "
                f"{dep['compared']} identical"
            )
        else:
            depart = f"never; {dep['identical']} of {dep['compared']} identical"
        p = c["wilcoxon_pvalue"]
        lines.append(
            f"| {c['task']} | {c['length'] or '–'} | {c['n']} | {_nats(c['mean_diff'])} "
            f"[{_nats(c['mean_ci_low'])}, {_nats(c['mean_ci_high'])}] | {_nats(c['hodges_lehmann'])} "
            f"[{_nats(c['hl_ci_low'])}, {_nats(c['hl_ci_high'])}] | "
            f"{'<0.001' if p < 0.001 else f'{p:.3f}'}{'' if c['wilcoxon_agrees'] else ' (disagrees)'} | "
            f"{flips} | {depart} | {c['noninferiority_p']:.3g} | "
            + (f"**{c['verdict']}**" if c["verdict"] == LOSS else c["verdict"])
            + " |"
        )
    lines += [
        "",
        "<sub>The verdict follows the t-test and t-interval of the mean (one statistic, so they agree; "
        "unadjusted for multiplicity); the Wilcoxon signed-rank test and Hodges–Lehmann interval are the "
        "distribution-free check (“disagrees” when its significance differs). NI: t-test of mean Δ ≤ −δ, "
        "one-sided α 0.025.</sub>",
    ]
    missing = sum(c["missing"] for c in section["cells"])
    if missing:
        lines.append(
            f"<sub>{missing} paired question(s) lack gold_logprob/gold_tokens on a side and are left "
            f"out.</sub>"
        )
    return lines
