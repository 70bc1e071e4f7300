"""Sampled runs (`evalkit run --temperature T --samples-per-question k`) compared clustered by question.

The k paired samples of one question are correlated, so each report row also gets the clustered
analysis (`evalkit.stats.clustered_paired`: cluster-robust CI of Δ, Durkalski's McNemar, NI at
the row's margin), with n questions and k stated. Two runs pair only when they sampled the same
way (temperature, truncation, k); whether their randomness was coupled (same seed and a coupled
sampler in both arms) is stated, since an uncoupled pair of runs pairs by question only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from evalkit import stats as st
from evalkit.compare.pairing import Pair
from evalkit.compare.verdict import (
    ALPHA,
    GAIN,
    IDENTICAL,
    INCONCLUSIVE,
    LOSS,
    MINOR_LOSS,
    NONINFERIOR,
    where,
)
from evalkit.errors import MismatchError
from evalkit.store import RunData

COUPLED = "coupled"  # the manifest's word (evalkit.backends.base.COUPLED)
SAME = ("temperature", "top_p", "top_k", "samples_per_question")


def _sampling(run: RunData) -> dict[str, Any] | None:
    s = run.manifest.get("sampling")
    return s if isinstance(s, dict) else None


def sampling_report(baseline: RunData, candidate: RunData) -> dict[str, Any] | None:
    """None for two greedy runs; else how both sampled and whether they were coupled. Refuses a
    greedy run against a sampled one and runs that sampled differently."""
    sb, sc = _sampling(baseline), _sampling(candidate)
    if sb is None and sc is None:
        return None
    if sb is None or sc is None:
        greedy = "baseline" if sb is None else "candidate"
        raise MismatchError(
            f"the {greedy} run is greedy and the other sampled (--temperature): they did not answer "
            "the same way; compare two greedy runs or two sampled ones"
        )
    for key in SAME:
        if sb.get(key) != sc.get(key):
            raise MismatchError(
                f"the runs sampled differently: sampling.{key} {sb.get(key)!r} (baseline) vs "
                f"{sc.get(key)!r} (candidate)"
            )
    if sb.get("seed") != sc.get("seed"):
        seeds = f"{sb.get('seed')} vs {sc.get('seed')}"
        coupling = f"uncoupled — different sampling seeds ({seeds}), pairing is by question only"
    elif sb.get("coupling") == COUPLED and sc.get("coupling") == COUPLED:
        coupling = COUPLED
    else:
        coupling = next(s["coupling"] for s in (sb, sc) if s.get("coupling") != COUPLED)
    k = sb.get("samples_per_question")
    line = (
        f"sampled at T = {sb.get('temperature')} (top-p {sb.get('top_p')}, top-k {sb.get('top_k')}), "
        f"k = {k} samples per question, seed {sb.get('seed')}: {coupling}"
    )
    return {
        **{key: sb.get(key) for key in SAME},
        "seeds": [sb.get("seed"), sc.get("seed")],
        "coupling": coupling,
        "line": line,
    }


def clustered_verdict(res: Any, discordant: int) -> str:
    """The row verdict's vocabulary (`evalkit.compare.verdict`) from the clustered analysis:
    significance from Durkalski's p (two-sided 0.05), "not worse" from its NI test."""
    if discordant == 0:
        return IDENTICAL
    if res.pvalue < ALPHA and res.estimate < 0:
        return MINOR_LOSS if res.noninferior else LOSS
    if res.pvalue < ALPHA and res.estimate > 0:
        return GAIN
    return NONINFERIOR if res.noninferior else INCONCLUSIVE


def clustered_rows(
    rows: dict[tuple, list[Pair]], margin_of: Callable[[str, int | None], float], ni_alpha: float
) -> list[dict[str, Any]]:
    """Per report row: the clustered analysis of its (question, sample) pairs, candidate − baseline."""
    out = []
    for (task, metric, length), pairs in rows.items():
        margin = margin_of(task, length)
        entry: dict[str, Any] = {"task": task, "metric": metric, "length": length}
        try:
            res = st.clustered_paired(
                [p.candidate for p in pairs],
                [p.baseline for p in pairs],
                [p.doc_id for p in pairs],
                margin=margin,
                ni_alpha=ni_alpha,
            )
        except ValueError as exc:  # one question: no spread between questions to estimate
            entry["note"] = str(exc)
        else:
            discordant = sum(p.baseline != p.candidate for p in pairs)
            entry["verdict"] = clustered_verdict(res, discordant)
            entry.update(  # JSON has no nan: a design effect without a naive SE is null
                {
                    k: None if isinstance(v, float) and not math.isfinite(v) else v
                    for k, v in res.to_dict().items()
                }
            )
        out.append(entry)
    return out


def apply_clustered_verdicts(rows: list[dict[str, Any]], clustered: list[dict[str, Any]]) -> None:
    """With k > 1 samples per question the per-sample rows treat correlated samples as independent
    pairs (anti-conservative), so each row's verdict, "not worse" and sentence are replaced by its
    clustered analysis's: the gate, the outcome and the overall verdict then read the clustered
    ones. A row whose clustered analysis could not run (one question) is inconclusive."""
    by_key = {(c["task"], c["metric"], c["length"]): c for c in clustered}
    for row in rows:
        c = by_key[(row["task"], row["metric"], row["length"])]
        if "estimate" not in c:
            row["verdict"], row["noninferior"] = INCONCLUSIVE, False
            row["verdict_text"] = f"{INCONCLUSIVE} (clustered: {c.get('note', 'not computed')})"
            continue
        row["verdict"], row["noninferior"] = c["verdict"], bool(c["noninferior"])
        row["verdict_text"] = _clustered_sentence(c)


def _clustered_sentence(r: dict[str, Any]) -> str:
    """One row's clustered analysis in words, without naming the row."""
    if "estimate" not in r:
        return r.get("note", "")
    k = str(r["k_max"]) if r["k_min"] == r["k_max"] else f"{r['k_min']}-{r['k_max']}"
    ni = "" if r["ni_pvalue"] is None else f", NI p = {r['ni_pvalue']:.3g} at {100 * r['margin']:.3g} pp"
    return (
        f"{r['n_clusters']} questions x k = {k}, Δ {100 * r['estimate']:+.2f} pp "
        f"[{100 * r['ci_low']:+.2f}, {100 * r['ci_high']:+.2f}], Durkalski p = {r['pvalue']:.3g}{ni}: "
        f"{r['verdict']}"
    )


def clustered_line(r: dict[str, Any]) -> str:
    """One row's clustered analysis in words (the terminal's form)."""
    return f"clustered, {where(r)}: {_clustered_sentence(r)}"


def clustered_markdown(report: dict[str, Any]) -> list[str]:
    """The sampled comparison's section: how the runs sampled, then one line per row."""
    sampling, rows = report.get("sampling"), report.get("clustered") or []
    if not sampling:
        return []
    lines = [
        "",
        "**Sampled runs, clustered by question** — " + sampling["line"],
        "",
        "| task | metric | length | questions | k | base acc | cand acc | Δ (95% CI, cluster-robust) "
        "| Durkalski p | NI p (δ) | design effect | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| {r['task']} | {r['metric']} | {r['length'] if r['length'] is not None else '—'} "
        if "estimate" not in r:
            lines.append(head + f"| {r.get('note', '')} |  |  |  |  |  |  |  |  |")
            continue
        k = str(r["k_max"]) if r["k_min"] == r["k_max"] else f"{r['k_min']}–{r['k_max']}"
        ni = "—" if r["ni_pvalue"] is None else f"{r['ni_pvalue']:.3g} ({100 * r['margin']:.3g} pp)"
        deff = "–" if r["design_effect"] is None else f"{r['design_effect']:.2f}"
        lines.append(
            head + f"| {r['n_clusters']} | {k} | {r['acc_b']:.3f} | {r['acc_a']:.3f} "
            f"| {100 * r['estimate']:+.2f} pp [{100 * r['ci_low']:+.2f}, {100 * r['ci_high']:+.2f}] "
            f"| {r['pvalue']:.3g} | {ni} | {deff} | {r['verdict']} |"
        )
    lines += [
        "",
        "<sub>Per question the k paired samples form a cluster: Δ = pooled difference, t interval on "
        "questions − 1 df with the cluster-robust (ratio-estimator) SE; Durkalski's clustered McNemar "
        "χ²; NI: one-sided t of Δ ≤ −δ (where no question's difference varies: Tango on the questions); "
        "design effect: the clustered variance over the naive one; verdict: the rows' vocabulary from "
        "Durkalski's p and this NI test. The table above counts every sample as an independent pair "
        "(its counts and p-values are descriptive); with k > 1 the rows' verdicts and the gate are "
        "these clustered ones.</sub>",
    ]
    return lines
