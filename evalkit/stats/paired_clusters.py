"""Paired binary comparison of two arms when each question contributes a cluster of k pairs.

Sampled generation (temperature > 0, k samples per question) gives k paired outcomes per
question; the samples of one question are correlated (same prompt, same difficulty), so counting
the n·k pairs as independent (ordinary McNemar) understates the error. Here the question is the
unit of independence:

- Estimate: Δ = Σ_i D_i / Σ_i m_i, with D_i = Σ_j (a_ij − b_ij) over question i's m_i pairs
  (the mean of the per-question mean differences when every question has k pairs).
- Cluster-robust SE (ratio estimator; Obuchowski 1998): Var = G/(G−1) · Σ_i (D_i − Δ m_i)² /
  (Σ m_i)², t interval on G − 1 degrees of freedom. This equals statsmodels' cluster-robust OLS
  of the differences on a constant; with k = 1 it is the ordinary paired t interval.
- Test of Δ = 0: Durkalski et al. 2003 (Stat Med 22:2417), X² = (Σ D_i)² / Σ D_i² ~ χ²₁,
  which with k = 1 is exactly McNemar's asymptotic test (b − c)²/(b + c).
- Non-inferiority at a margin δ: t = (Δ + δ)/SE, one-sided on G − 1 degrees of freedom.
- Where the differences do not vary between questions (SE 0: coupled arms that agree on every
  sample), the interval and NI count each question once (Tango on G pairs), never a zero width.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from evalkit.stats._result import Result
from evalkit.stats.noninferiority import noninferiority_test
from evalkit.stats.paired_ci import tango_ci


@dataclass(frozen=True)
class ClusteredPairedResult(Result):
    n_clusters: int  # questions
    n_pairs: int  # paired samples over all questions
    k_min: int  # fewest pairs in a question (k_min == k_max: every question has k)
    k_max: int
    acc_a: float  # pooled accuracy of arm A (the candidate in compare)
    acc_b: float
    estimate: float  # Δ = acc_a − acc_b
    stderr: float  # cluster-robust
    ci_low: float
    ci_high: float
    confidence: float
    df: int  # G − 1
    statistic: float  # Durkalski's X²
    pvalue: float  # two-sided, χ²₁
    stderr_naive: float  # as if the n·k pairs were independent
    design_effect: float  # (stderr / stderr_naive)²; nan when the naive SE is 0
    margin: float | None = None
    ni_statistic: float | None = None
    ni_pvalue: float | None = None  # one-sided, H0: Δ <= −margin
    ni_alpha: float | None = None
    noninferior: bool | None = None
    note: str = ""
    title: ClassVar[str] = (
        "Clustered paired comparison: cluster-robust t interval (Obuchowski) and Durkalski's McNemar"
    )


def clustered_paired(
    a: Sequence[bool],
    b: Sequence[bool],
    clusters: Sequence[Hashable],
    *,
    confidence: float = 0.95,
    margin: float | None = None,
    ni_alpha: float = 0.025,
) -> ClusteredPairedResult:
    """Arm A against arm B on paired outcomes `a[i]`, `b[i]` whose pair i belongs to question
    `clusters[i]` (difference A − B)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.ndim != 1 or xa.shape != xb.shape or len(xa) != len(clusters):
        raise ValueError("a, b and clusters must be flat sequences of the same length")
    if margin is not None and not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    _, codes = np.unique(np.asarray([repr(c) for c in clusters]), return_inverse=True)
    g = int(codes.max()) + 1 if len(codes) else 0
    if g < 2:
        raise ValueError("a clustered comparison needs at least two questions")
    d = xa - xb
    m = np.bincount(codes, minlength=g).astype(float)
    big_d = np.bincount(codes, weights=d, minlength=g)
    n = int(m.sum())
    est = float(big_d.sum() / n)
    resid = big_d - est * m
    se = math.sqrt(g / (g - 1) * float(resid @ resid)) / n
    t = float(stats.t.ppf(0.5 + confidence / 2, g - 1))
    e = d - est
    se_naive = math.sqrt(float(e @ e) / (n * (n - 1))) if n > 1 else math.nan
    deff = (se / se_naive) ** 2 if se_naive and se_naive > 0 else math.nan
    denom = float(big_d @ big_d)
    x2 = float(big_d.sum()) ** 2 / denom if denom > 0 else 0.0
    p = float(stats.chi2.sf(x2, 1)) if denom > 0 else 1.0
    note = "" if denom > 0 else "no question has a net difference between the arms: p = 1"
    ci = (est - t * se, est + t * se)
    # no spread of the difference between questions (e.g. coupled arms that agree on every
    # sample): a zero SE says nothing about questions not asked, so fall back to counting each
    # question once, as one pair that went A's way, B's way or neither (Tango on G pairs)
    b_q, c_q = int(np.sum(big_d > 0)), int(np.sum(big_d < 0))
    if se == 0:
        tango = tango_ci(b_q, c_q, g, confidence)
        ci = (tango.ci_low, tango.ci_high)
        note = (note + "; " if note else "") + (
            "no spread between questions (cluster-robust SE 0): CI and NI count each question "
            "as one pair (Tango)"
        )
    ni: dict[str, object] = {}
    if margin is not None:
        if se > 0:
            z = (est + margin) / se
            p_ni = float(stats.t.sf(z, g - 1))
        else:
            res = noninferiority_test(b_q, c_q, g, margin=margin, alpha=ni_alpha)
            z, p_ni = res.statistic, res.pvalue
        ni = dict(
            margin=margin, ni_statistic=z, ni_pvalue=p_ni, ni_alpha=ni_alpha, noninferior=p_ni < ni_alpha
        )
    return ClusteredPairedResult(
        n_clusters=g,
        n_pairs=n,
        k_min=int(m.min()),
        k_max=int(m.max()),
        acc_a=float(xa.mean()),
        acc_b=float(xb.mean()),
        estimate=est,
        stderr=se,
        ci_low=ci[0],
        ci_high=ci[1],
        confidence=confidence,
        df=g - 1,
        statistic=x2,
        pvalue=p,
        stderr_naive=se_naive,
        design_effect=deff,
        note=note,
        **ni,  # type: ignore[arg-type]
    )
