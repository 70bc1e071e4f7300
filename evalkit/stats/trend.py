"""Does the gap between arms change with sequence length?

Three views, as recommended in the statistics reference (section 6):
- `cochran_armitage` / `linear_by_linear`: trend in a rate (here: the per-length discordance)
  across ordered bins;
- `logistic_trend_clustered`: marginal model `correct ~ arm * log2(len)` over one row per
  (question, length, arm), with question-clustered robust SEs; the arm:log_len term is the
  change in the arms' log-odds gap per doubling of length;
- `conditional_logistic_trend`: logistic regression of "candidate alone right" on log2(len)
  among discordant pairs only (the matched-pair conditional model; question effects cancel).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from evalkit.stats._result import Result


@dataclass(frozen=True)
class TrendResult(Result):
    method: str
    statistic: float  # z
    pvalue: float  # two-sided
    note: str = ""
    title: ClassVar[str] = "Trend test across ordered bins"


def cochran_armitage(
    successes: Sequence[int], totals: Sequence[int], scores: Sequence[float] | None = None
) -> TrendResult:
    """Cochran-Armitage trend test: z = T / sqrt(Var T), T = sum x_k (r_k - t_k p), two-sided."""
    r = np.asarray(successes, dtype=float)
    t = np.asarray(totals, dtype=float)
    x = np.arange(len(r), dtype=float) if scores is None else np.asarray(scores, dtype=float)
    if not (len(r) == len(t) == len(x)) or len(r) < 2:
        raise ValueError("need at least two bins with successes, totals and scores of equal length")
    if np.any(r < 0) or np.any(r > t):
        raise ValueError("need 0 <= successes <= totals in every bin")
    big_n = t.sum()
    pbar = r.sum() / big_n
    stat_t = float(np.sum(x * (r - t * pbar)))
    var = pbar * (1 - pbar) * (np.sum(t * x * x) - np.sum(t * x) ** 2 / big_n)
    if var <= 0:
        why = "every bin has the same rate of 0 or 1" if pbar in (0.0, 1.0) else "all scores are equal"
        return TrendResult("cochran-armitage", 0.0, 1.0, note=f"no trend testable: {why}")
    z = stat_t / math.sqrt(var)
    return TrendResult("cochran-armitage", z, float(2 * stats.norm.sf(abs(z))))


def linear_by_linear(
    successes: Sequence[int], totals: Sequence[int], scores: Sequence[float] | None = None
) -> TrendResult:
    """Linear-by-linear association (as statsmodels' test_ordinal_association): z_CA sqrt((N-1)/N)."""
    ca = cochran_armitage(successes, totals, scores)
    big_n = float(np.sum(totals))
    z = ca.statistic * math.sqrt((big_n - 1) / big_n)
    p = float(2 * stats.norm.sf(abs(z))) if not ca.note else 1.0
    return TrendResult("linear-by-linear", z, p, note=ca.note)


@dataclass(frozen=True)
class LogisticTrendResult(Result):
    method: str
    coef: float  # log-odds per doubling of length (interaction, or slope)
    stderr: float
    statistic: float
    pvalue: float
    n_obs: int
    n_clusters: int
    note: str = ""
    title: ClassVar[str] = "Logistic trend over log2(length)"


def _nan_result(method: str, n_obs: int, n_clusters: int, note: str) -> LogisticTrendResult:
    return LogisticTrendResult(method, math.nan, math.nan, math.nan, math.nan, n_obs, n_clusters, note)


def _codes(clusters: Sequence[Hashable]) -> np.ndarray:
    return np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]


def _fit_glm(y: np.ndarray, x: np.ndarray, groups: np.ndarray):
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        model = sm.GLM(y, x, family=sm.families.Binomial())
        return model.fit(cov_type="cluster", cov_kwds={"groups": groups})


def _fit_or_note(y, x, groups, method, term):
    """Fit; return (coef, se, z, p) of column `term`, or a note on why it cannot be estimated."""
    from statsmodels.tools.sm_exceptions import (
        ConvergenceWarning,
        PerfectSeparationError,
        PerfectSeparationWarning,
    )

    try:
        fit = _fit_glm(y, x, groups)
    except (PerfectSeparationError, PerfectSeparationWarning):
        return None, "not estimable: perfect separation (some arm/length cell is all right or all wrong)"
    except ConvergenceWarning:
        return None, "not estimable: the logistic fit did not converge"
    except (np.linalg.LinAlgError, ValueError) as exc:
        return None, f"not estimable: {exc}"
    coef, se = float(fit.params[term]), float(fit.bse[term])
    if not (math.isfinite(coef) and math.isfinite(se)) or se <= 0:
        return None, "not estimable: degenerate fit"
    return (coef, se, float(fit.tvalues[term]), float(fit.pvalues[term])), ""


def logistic_trend_clustered(
    correct: Sequence[float], arm: Sequence[int], length: Sequence[float], clusters: Sequence[Hashable]
) -> LogisticTrendResult:
    """GLM-binomial `correct ~ arm * log2(len)` with question-clustered SEs; tests arm:log_len.

    One row per (question, length, arm); `arm` is 1 for the candidate; cluster on the base
    question so its several lengths count as one independent unit.
    """
    y = np.asarray(correct, dtype=float)
    a = np.asarray(arm, dtype=float)
    loglen = np.log2(np.asarray(length, dtype=float))
    if not (len(y) == len(a) == len(loglen) == len(clusters)):
        raise ValueError("correct, arm, length and clusters must have equal lengths")
    groups = _codes(clusters)
    n_cl = int(groups.max()) + 1 if len(groups) else 0
    method = "glm-binomial arm*log2(len), question-clustered"
    if len(np.unique(loglen)) < 2:
        return _nan_result(method, len(y), n_cl, "not estimable: only one length")
    if n_cl < 2:
        return _nan_result(method, len(y), n_cl, "not estimable: fewer than two question clusters")
    xc = loglen - loglen.mean()
    x = np.column_stack([np.ones_like(y), a, xc, a * xc])
    fitted, note = _fit_or_note(y, x, groups, method, 3)
    if fitted is None:
        return _nan_result(method, len(y), n_cl, note)
    return LogisticTrendResult(method, *fitted, len(y), n_cl)


def conditional_logistic_trend(
    candidate_only: Sequence[int], length: Sequence[float], clusters: Sequence[Hashable] | None = None
) -> LogisticTrendResult:
    """Among discordant pairs: logit P(candidate alone right) = b0 + b1 (log2 len - mean); tests b1.

    With clusters, SEs are cluster-robust (a base question discordant at several lengths).
    Little power (uses only b + c pairs); not estimable when all pairs go one way.
    """
    y = np.asarray(candidate_only, dtype=float)
    loglen = np.log2(np.asarray(length, dtype=float))
    if len(y) != len(loglen):
        raise ValueError("candidate_only and length must have equal lengths")
    clusters = list(range(len(y))) if clusters is None else clusters
    groups = _codes(clusters) if len(y) else np.zeros(0, dtype=int)
    n_cl = int(groups.max()) + 1 if len(groups) else 0
    method = "conditional logistic on discordant pairs, log2(len)"
    if len(y) < 3:
        return _nan_result(method, len(y), n_cl, "not estimable: fewer than three discordant pairs")
    if len(np.unique(y)) < 2:
        return _nan_result(method, len(y), n_cl, "not estimable: every discordant pair goes the same way")
    if len(np.unique(loglen)) < 2:
        return _nan_result(method, len(y), n_cl, "not estimable: discordant pairs at one length only")
    x = np.column_stack([np.ones_like(y), loglen - loglen.mean()])
    fitted, note = _fit_or_note(y, x, groups, method, 1)
    if fitted is None:
        return _nan_result(method, len(y), n_cl, note)
    return LogisticTrendResult(method, *fitted, len(y), n_cl)
