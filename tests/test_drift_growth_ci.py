"""Growth exponents across prompts: the CI covers the true exponent at about its nominal rate.

Synthetic trajectories with a known exponent and AR(1) noise in log space (a state error, once
made, persists: neighbouring positions are strongly correlated). The per-prompt fit summarised
across 16 independent prompts (`evalkit.drift.across`) covers the true exponent in about 95% of
seeds; the naive per-bucket WLS on one trajectory (statsmodels' WLS with delta-method weights,
what one prompt allows) does not, because its buckets' residuals are correlated.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.signal import lfilter

from evalkit.drift.across import mean_ci, ols_slope, ratio_ci, summarize_slopes
from evalkit.drift.positions import bucket_edges, bucket_of

L, EXPONENT, N_PROMPTS, START = 4096, 0.5, 16, 64
EDGES = bucket_edges(L, 2)
POS = np.arange(1, L + 1)
BUCKET = bucket_of(POS, EDGES)
NB = len(EDGES) - 1
COUNT = np.bincount(BUCKET, minlength=NB)
CENTRE = np.exp(np.bincount(BUCKET, weights=np.log(POS), minlength=NB) / COUNT)


def _trajectories(rng, n: int, phi: float, sigma: float) -> np.ndarray:
    """n trajectories 1e-6 * t^EXPONENT * exp(AR(1)), stationary AR(1) with sd sigma."""
    e = rng.standard_normal((n, L)) * sigma * np.sqrt(1 - phi**2)
    return 1e-6 * POS**EXPONENT * np.exp(lfilter([1.0], [1.0, -phi], e, axis=1))


def _bucket_stats(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-trajectory bucket means and within-bucket sds."""
    n = v.shape[0]
    idx = (BUCKET[None, :] + NB * np.arange(n)[:, None]).ravel()
    s = np.bincount(idx, weights=v.ravel(), minlength=n * NB).reshape(n, NB)
    s2 = np.bincount(idx, weights=(v * v).ravel(), minlength=n * NB).reshape(n, NB)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.maximum((s2 - s * s / COUNT) / (COUNT - 1), 0.0))
    return s / COUNT, sd


def _one_trajectory_wls(mean: np.ndarray, sd: np.ndarray) -> tuple[float, float]:
    """The slope's 95% CI of log(bucket mean) on log(position) from START, weighted by the inverse
    delta-method variance n·mean²/sd², its SE scaled up by the residuals when they exceed it."""
    sm = pytest.importorskip("statsmodels.api")
    use = (CENTRE >= START) & (COUNT >= 2) & (mean > 0) & (sd > 0)
    X, y = sm.add_constant(np.log(CENTRE[use])), np.log(mean[use])
    w = COUNT[use] * mean[use] ** 2 / sd[use] ** 2
    scaled = sm.WLS(y, X, weights=w).fit()
    fixed = sm.WLS(y, X, weights=w).fit(cov_type="fixed scale", cov_kwds={"scale": 1.0})
    half = stats.t.ppf(0.975, use.sum() - 2) * max(scaled.bse[1], fixed.bse[1])
    return scaled.params[1] - half, scaled.params[1] + half


@pytest.mark.parametrize("phi, sigma", [(0.99, 0.3), (0.999, 0.5)])
def test_across_prompt_ci_covers_at_nominal_rate_and_one_trajectory_wls_does_not(phi, sigma):
    seeds = 200
    covered = naive_covered = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        means, sds = _bucket_stats(_trajectories(rng, N_PROMPTS, phi, sigma))
        s = summarize_slopes("kl", [ols_slope(CENTRE, m, START) for m in means], START, L)
        assert s.n_prompts == N_PROMPTS
        covered += s.ci_low <= EXPONENT <= s.ci_high
        lo, hi = _one_trajectory_wls(means[0], sds[0])
        naive_covered += lo <= EXPONENT <= hi
    rate, naive = covered / seeds, naive_covered / seeds
    # nominal 95%: binomial sd over 200 seeds is 1.5 points; the t-CI is slightly liberal because
    # log(bucket mean) is biased low in the short early buckets (Jensen) by an amount that shrinks
    # with the bucket, a small tilt every prompt shares
    assert 0.89 <= rate <= 0.99, rate
    assert naive <= 0.80, naive


def test_mean_ci_is_the_student_t_interval():
    v = [0.3, 0.5, 0.45, 0.61, 0.2]
    c = mean_ci(v)
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=np.mean(v), scale=stats.sem(v))
    assert c["mean"] == pytest.approx(np.mean(v)) and c["ci_low"] == pytest.approx(lo)
    assert c["ci_high"] == pytest.approx(hi) and c["max"] == 0.61 and c["p50"] == 0.45
    one = mean_ci([0.4, None, float("nan")])
    assert one["n"] == 1 and one["ci_low"] is None


def test_ols_slope_is_exact_on_a_power_law_and_says_why_not():
    m = 3e-9 * CENTRE**0.7
    s, why = ols_slope(CENTRE, m, START)
    assert s == pytest.approx(0.7, abs=1e-12) and why == ""
    assert ols_slope(CENTRE, np.zeros(NB), START) == (None, "zero")
    assert ols_slope(CENTRE, m, 2000) == (None, "insufficient")  # one octave only


def test_summaries_verdicts():
    assert summarize_slopes("kl", [(0.01, ""), (-0.02, ""), (0.015, "")], 1, 2).verdict == "flat"
    g = summarize_slopes("kl", [(0.5, ""), (0.6, ""), (0.55, ""), (None, "zero")], 1, 2)
    assert g.verdict == "grows" and g.n_prompts == 3 and g.n_zero == 1
    assert summarize_slopes("kl", [(None, "zero")] * 3, 1, 2).verdict == "zero"
    wide = summarize_slopes("kl", [(1.5, ""), (-1.0, ""), (0.3, "")], 1, 2)  # holds 0, but 6 wide
    assert wide.verdict == "inconclusive"


def test_ratio_ci_is_a_geometric_mean_of_paired_ratios():
    r = ratio_ci([2.0, 8.0, 4.0], [1.0, 2.0, 1.0])
    assert r["ratio"] == pytest.approx(32.0 ** (1 / 3)) and r["ci_low"] < r["ratio"] < r["ci_high"]
    z = ratio_ci([1.0, 2.0], [0.0, 0.0])
    assert z["ratio"] is None and z["den_zero"] == 2
