"""Paired differences of a continuous measure (e.g. the gold answer's log-probability per arm).

`paired_mean` is the t-test and t-interval of the mean difference (one statistic: the interval
excludes 0 exactly when the test rejects). `signed_rank` is the distribution-free check: the
Wilcoxon signed-rank test (scipy) with the Hodges-Lehmann estimate and its signed-rank interval
(order statistics of the Walsh averages; exact null distribution up to n = 50, normal beyond).
`noninferiority_mean` tests H0: mean difference <= -margin with the same t statistic. Every
function returns exactly 0 / p = 1 / [0, 0] when every difference is exactly 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from evalkit.stats._result import Result

EXACT_UP_TO = 50  # signed-rank null distribution enumerated exactly up to this n
WALSH_UP_TO = 4000  # Hodges-Lehmann interval computed up to this n (n(n+1)/2 Walsh averages)


def _array(diffs) -> np.ndarray:
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("need a non-empty 1-d sequence of paired differences")
    if not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be finite")
    return d


@dataclass(frozen=True)
class PairedMeanResult(Result):
    n: int
    mean: float
    stderr: float
    ci_low: float
    ci_high: float
    confidence: float
    statistic: float  # t
    pvalue: float  # two-sided
    df: int
    title: ClassVar[str] = "Paired mean difference: t-test and t-interval"


def paired_mean(diffs, confidence: float = 0.95) -> PairedMeanResult:
    d = _array(diffs)
    n = d.size
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    if se == 0.0:
        return PairedMeanResult(
            n,
            mean,
            0.0,
            mean,
            mean,
            confidence,
            0.0 if mean == 0 else math.inf,
            1.0 if mean == 0 else 0.0,
            n - 1,
        )
    if not math.isfinite(se):
        return PairedMeanResult(n, mean, se, -math.inf, math.inf, confidence, math.nan, 1.0, 0)
    q = float(stats.t.ppf(0.5 + confidence / 2, n - 1))
    t = mean / se
    p = float(2 * stats.t.sf(abs(t), n - 1))
    return PairedMeanResult(n, mean, se, mean - q * se, mean + q * se, confidence, t, p, n - 1)


@dataclass(frozen=True)
class MeanNonInferiorityResult(Result):
    margin: float
    statistic: float  # t = (mean + margin) / se
    pvalue: float  # one-sided
    alpha: float
    noninferior: bool
    estimate: float
    title: ClassVar[str] = "t-test of non-inferiority, H0: mean difference <= -margin"


def noninferiority_mean(diffs, margin: float, alpha: float = 0.025) -> MeanNonInferiorityResult:
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    res = paired_mean(diffs)
    shifted = res.mean + margin
    if res.stderr == 0.0:
        p = 0.0 if shifted > 0 else 1.0
        t = math.inf if shifted > 0 else -math.inf
    elif not math.isfinite(res.stderr):
        p, t = 1.0, math.nan
    else:
        t = shifted / res.stderr
        p = float(stats.t.sf(t, res.df))
    return MeanNonInferiorityResult(margin, t, p, alpha, p < alpha, res.mean)


@dataclass(frozen=True)
class SignedRankResult(Result):
    n: int
    n_nonzero: int
    statistic: float
    pvalue: float  # two-sided Wilcoxon signed-rank
    hodges_lehmann: float
    ci_low: float
    ci_high: float
    confidence: float
    method: str  # "exact" or "normal" (the interval's critical value)
    note: str = ""
    title: ClassVar[str] = "Wilcoxon signed-rank test, Hodges-Lehmann estimate and interval"


def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T <= t) for t = 0..n(n+1)/2 under H0 (each rank's sign a fair coin)."""
    dist = np.zeros(n * (n + 1) // 2 + 1)
    dist[0] = 1.0
    for k in range(1, n + 1):
        shifted = np.zeros_like(dist)
        shifted[k:] = dist[:-k]
        dist = 0.5 * (dist + shifted)
    return np.cumsum(dist)


def _rank_of_lower_limit(n: int, confidence: float) -> tuple[int, str]:
    """1-based order statistic C of the Walsh averages: the interval is [W_(C), W_(M+1-C)]."""
    alpha = 1 - confidence
    if n <= EXACT_UP_TO:
        cdf = _signed_rank_cdf(n)
        below = np.nonzero(cdf <= alpha / 2)[0]
        return (int(below[-1]) + 1 if below.size else 0), "exact"
    m = n * (n + 1) / 2
    z = stats.norm.ppf(1 - alpha / 2)
    return int(math.floor(m / 2 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))), "normal"


def signed_rank(diffs, confidence: float = 0.95) -> SignedRankResult:
    d = _array(diffs)
    n, nonzero = d.size, int(np.count_nonzero(d))
    if nonzero == 0:
        return SignedRankResult(n, 0, 0.0, 1.0, 0.0, 0.0, 0.0, confidence, "exact", "every difference is 0")
    res = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    stat, p = float(res.statistic), float(res.pvalue)
    if n > WALSH_UP_TO:
        hl = float(np.median(d))
        note = f"n > {WALSH_UP_TO}: estimate is the median difference, no interval"
        return SignedRankResult(n, nonzero, stat, p, hl, math.nan, math.nan, confidence, "none", note)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    hl = float(np.median(walsh))
    c, method = _rank_of_lower_limit(n, confidence)
    if c < 1:
        note = f"n = {n} is too small for a {confidence:.0%} signed-rank interval"
        return SignedRankResult(n, nonzero, stat, p, hl, -math.inf, math.inf, confidence, method, note)
    return SignedRankResult(
        n, nonzero, stat, p, hl, float(walsh[c - 1]), float(walsh[walsh.size - c]), confidence, method
    )
