"""Non-inferiority of a paired continuous measure under heavy tails, by a rule stated in advance.

The t-interval of a mean is unreliable when the paired differences are heavy-tailed (a few
questions diverge by a lot while most move by nothing: excess kurtosis of 50+ is common for the
gold log-prob shift). Rule, fixed before the data are seen:

- if the excess kurtosis of d exceeds KURTOSIS_LIMIT, or at least ZERO_SHARE_LIMIT of the
  differences are exactly 0 (zero inflation), the primary analysis is the Wilcoxon signed-rank
  test of H0: pseudo-median <= -margin (scipy on d + margin), with the Hodges-Lehmann estimate;
  the estimand is then the pseudo-median, not the mean;
- otherwise it is the BCa bootstrap of the mean (Efron 1987, scipy), clustered by document when
  clusters are given (documents resampled, the jackknife over documents), with a fixed seed.

Non-inferior when the one-sided (1 - alpha) lower bound (bootstrap) or the signed-rank test
(rank) clears -margin. All-zero differences are non-inferior by construction on either path.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from evalkit.stats._result import Result

KURTOSIS_LIMIT = 3.0  # excess kurtosis above which the mean's interval is not trusted
ZERO_SHARE_LIMIT = 0.5  # share of exact-zero differences that makes d zero-inflated
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class RobustNonInferiorityResult(Result):
    method: str  # "signed-rank" or "bca-bootstrap"
    reason: str
    n: int
    clusters: int
    excess_kurtosis: float
    zero_share: float
    estimate: float  # the pseudo-median (signed-rank) or the mean (bootstrap)
    lower_bound: float  # one-sided (1 - alpha) lower confidence bound of the estimand
    pvalue: float | None  # signed-rank one-sided p; None for the bootstrap (decided by the bound)
    margin: float
    alpha: float
    noninferior: bool
    title: ClassVar[str] = (
        "Non-inferiority of a paired continuous measure (primary chosen by a pre-stated rule)"
    )


def choose_primary(d: np.ndarray) -> tuple[str, str, float, float]:
    """(method, reason, excess kurtosis, zero share) by the rule in the module docstring."""
    zero_share = float(np.mean(d == 0.0))
    kurt = float(stats.kurtosis(d, fisher=True, bias=False)) if d.size > 3 and np.ptp(d) > 0 else 0.0
    if zero_share >= ZERO_SHARE_LIMIT:
        return "signed-rank", f"{zero_share:.0%} of differences are exactly 0", kurt, zero_share
    if kurt > KURTOSIS_LIMIT:
        return "signed-rank", f"excess kurtosis {kurt:.1f} > {KURTOSIS_LIMIT:g}", kurt, zero_share
    return (
        "bca-bootstrap",
        f"excess kurtosis {kurt:.1f} <= {KURTOSIS_LIMIT:g}, not zero-inflated",
        kurt,
        zero_share,
    )


def _hodges_lehmann(d: np.ndarray) -> float:
    if d.size > 4000:  # the Walsh averages would not fit; the median is the documented fallback
        return float(np.median(d))
    i, j = np.triu_indices(d.size)
    return float(np.median((d[i] + d[j]) / 2.0))


def _signed_rank_lower_bound(d: np.ndarray, alpha: float) -> float:
    """Largest theta the one-sided signed-rank test of H0: pseudo-median <= theta still rejects."""
    walsh = d if d.size > 4000 else (d[np.triu_indices(d.size)[0]] + d[np.triu_indices(d.size)[1]]) / 2.0
    walsh = np.sort(walsh)
    lo, hi = 0, walsh.size - 1
    while lo < hi:  # the p-value rises with theta: find the first Walsh average it fails to reject at
        mid = (lo + hi) // 2
        p = stats.wilcoxon(d - walsh[mid], alternative="greater", zero_method="wilcox").pvalue
        lo, hi = (mid + 1, hi) if p < alpha else (lo, mid)
    return float(walsh[max(0, lo - 1)]) if lo > 0 else float(walsh[0])


def _cluster_sums(d: np.ndarray, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, np.ndarray]:
    if clusters is None:
        return d, np.ones_like(d)
    if len(clusters) != d.size:
        raise ValueError("need one cluster label per difference")
    labels: dict[Hashable, int] = {}
    index = np.array([labels.setdefault(c, len(labels)) for c in clusters])
    return np.bincount(index, weights=d), np.bincount(index).astype(float)


def robust_noninferiority(
    diffs: Sequence[float],
    margin: float,
    alpha: float = 0.025,
    clusters: Sequence[Hashable] | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> RobustNonInferiorityResult:
    """H0: the estimand <= -margin, on the primary analysis the pre-stated rule picks."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError("need a non-empty 1-d sequence of finite paired differences")
    if margin <= 0:
        raise ValueError(f"the margin must be positive, got {margin}")
    sums, sizes = _cluster_sums(d, clusters)
    method, reason, kurt, zero_share = choose_primary(d)
    if not np.any(d):
        return RobustNonInferiorityResult(
            method, "every difference is 0", d.size, sums.size, 0.0, 1.0, 0.0, 0.0, None, margin, alpha, True
        )
    if method == "signed-rank":
        p = float(stats.wilcoxon(d + margin, alternative="greater", zero_method="wilcox").pvalue)
        lower = _signed_rank_lower_bound(d, alpha)
        return RobustNonInferiorityResult(
            method,
            reason,
            d.size,
            sums.size,
            kurt,
            zero_share,
            _hodges_lehmann(d),
            lower,
            p,
            margin,
            alpha,
            p < alpha,
        )
    if sums.size < 3:
        raise ValueError("the bootstrap needs at least 3 clusters")
    res = stats.bootstrap(
        (sums, sizes),
        lambda s, n, axis=-1: s.sum(axis=axis) / n.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=1.0 - 2.0 * alpha,
        method="BCa",
        random_state=np.random.default_rng(seed),
    )
    lower = float(res.confidence_interval.low)
    mean = float(sums.sum() / sizes.sum())
    return RobustNonInferiorityResult(
        method, reason, d.size, sums.size, kurt, zero_share, mean, lower, None, margin, alpha, lower > -margin
    )
