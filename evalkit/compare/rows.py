"""One report row: the paired statistics of one task x metric (x length) cell.

Differences are candidate - baseline: the candidate sits in the stats module's "A" slot
(b = candidate-only right, c = baseline-only right).
"""

from __future__ import annotations

import math
from typing import Any

from evalkit import stats as st
from evalkit.compare.cell import CompareCell
from evalkit.compare.pairing import Pair
from evalkit.store.schema import doc_sort_key


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


_id_sort = doc_sort_key


def compute_row(
    task: str,
    metric: str,
    length: int | None,
    pairs: list[Pair],
    *,
    margin: float,
    confidence: float = 0.95,
    ni_alpha: float = 0.025,
) -> dict[str, Any]:
    n = len(pairs)
    both = sum(p.baseline and p.candidate for p in pairs)
    base_only_ids = sorted((p.doc_id for p in pairs if p.baseline and not p.candidate), key=_id_sort)
    cand_only_ids = sorted((p.doc_id for p in pairs if p.candidate and not p.baseline), key=_id_sort)
    b_only, c_only = len(base_only_ids), len(cand_only_ids)
    k_base, k_cand = both + b_only, both + c_only
    base, cand = st.proportion(k_base, n, confidence), st.proportion(k_cand, n, confidence)
    mc = st.mcnemar(c_only, b_only)
    ci = st.tango_ci(c_only, b_only, n, confidence)
    ni = st.noninferiority_test(c_only, b_only, n, margin=margin, alpha=ni_alpha)
    psi = (b_only + c_only) / n
    notes = [mc.note] if mc.note else []
    mde, resolvable = None, False
    if psi > 0:
        mde_res = st.connor_mde(n, psi)
        resolvable = not mde_res.note
        if resolvable:
            mde = mde_res.mde
        else:
            notes.append(
                f"MDE: nothing is resolvable at n = {n}: even a difference equal to the discordance "
                f"rate {100 * psi:.2f} pp is detected with less than 80% power"
            )
    else:
        notes.append(
            "MDE undefined with no discordant questions (needs a discordance rate, e.g. from an A/A run)"
        )
    return CompareCell(
        task=task,
        metric=metric,
        length=length,
        n=n,
        acc_baseline=base.estimate,
        acc_candidate=cand.estimate,
        stderr_baseline=_num(base.stderr),
        stderr_candidate=_num(cand.stderr),
        wilson_baseline=(base.ci_low, base.ci_high),
        wilson_candidate=(cand.ci_low, cand.ci_high),
        both_right=both,
        both_wrong=n - both - b_only - c_only,
        baseline_only=b_only,
        candidate_only=c_only,
        discordance=psi,
        mcnemar_midp=mc.midp,
        mcnemar_exact_p=mc.exact,
        mcnemar_asymptotic_p=mc.asymptotic,
        mcnemar_midp_holm=None,
        diff=ci.estimate,
        diff_ci_low=ci.ci_low,
        diff_ci_high=ci.ci_high,
        margin=margin,
        noninferiority_z=_num(ni.statistic),
        noninferiority_p=ni.pvalue,
        noninferior=ni.noninferior,
        mde=mde,
        mde_resolvable=resolvable,
        baseline_only_ids=tuple(base_only_ids),
        candidate_only_ids=tuple(cand_only_ids),
        notes=tuple(notes),
        overflow_baseline=sum(_overflow(p.baseline_sample) for p in pairs),
        overflow_candidate=sum(_overflow(p.candidate_sample) for p in pairs),
    ).to_dict()


def _overflow(sample: dict[str, Any] | None) -> bool:
    return sample is not None and "overflow" in (sample.get("flags") or [])


def overflow_notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per cell where a side has samples flagged "overflow": a state that reached its
    format's max is a failure of the format, not only a wrong answer."""
    out = []
    for r in rows:
        b, c = r.get("overflow_baseline", 0), r.get("overflow_candidate", 0)
        if b or c:
            where = f"{r['task']}:{r['metric']} @ {'all' if r['length'] is None else r['length']}"
            out.append(
                f"overflow: {where}: {c} of {r['n']} candidate and {b} baseline sample(s) flagged "
                "overflow (the recurrent state reached the format's max or went non-finite)"
            )
    return out


def add_holm(rows: list[dict[str, Any]]) -> None:
    """Holm-adjust the mid-p values across all rows of the report (in place)."""
    if not rows:
        return
    adjusted = st.holm([r["mcnemar_midp"] for r in rows]).adjusted
    for row, p in zip(rows, adjusted):
        row["mcnemar_midp_holm"] = p
