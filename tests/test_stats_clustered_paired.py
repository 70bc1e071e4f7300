"""The clustered paired analysis against independent oracles: with k = 1 the ordinary paired
analysis (scipy's paired t, statsmodels' McNemar), with k > 1 statsmodels' cluster-robust OLS,
Durkalski's χ² against its exact sign-flip distribution, and its type I error under
within-question correlation (where the naive McNemar over all samples does not hold)."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from evalkit.stats import clustered_paired, noninferiority_test, tango_ci


def _data(rng, g, k, pa=0.6, pb=0.5):
    ids = np.repeat(np.arange(g), k)
    return rng.random(g * k) < pa, rng.random(g * k) < pb, ids


def test_k1_is_the_ordinary_paired_analysis():
    rng = np.random.default_rng(1)
    a, b, ids = _data(rng, 80, 1)
    r = clustered_paired(a, b, ids)
    t = stats.ttest_rel(a.astype(float), b.astype(float)).confidence_interval(0.95)
    assert r.ci_low == pytest.approx(t.low, abs=1e-12) and r.ci_high == pytest.approx(t.high, abs=1e-12)
    b_only, c_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    oracle = mcnemar([[0, b_only], [c_only, 0]], exact=False, correction=False)
    assert r.pvalue == pytest.approx(oracle.pvalue, rel=1e-12)
    assert r.statistic == pytest.approx(oracle.statistic, rel=1e-12)
    assert (r.k_min, r.k_max, r.n_clusters) == (1, 1, 80)


def test_k3_matches_statsmodels_cluster_robust_ols():
    rng = np.random.default_rng(2)
    ids = np.concatenate([np.full(k, i) for i, k in enumerate(rng.integers(1, 5, 40))])  # unequal k
    a, b = rng.random(len(ids)) < 0.7, rng.random(len(ids)) < 0.55
    r = clustered_paired(a, b, [f"q{i}" for i in ids], margin=0.05)
    d = a.astype(float) - b
    fit = sm.OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": ids}, use_t=True)
    assert r.estimate == pytest.approx(fit.params[0], abs=1e-12)
    assert r.stderr == pytest.approx(fit.bse[0], rel=1e-10)
    low, high = fit.conf_int(0.05)[0]
    assert (r.ci_low, r.ci_high) == (pytest.approx(low, rel=1e-10), pytest.approx(high, rel=1e-10))
    # NI: the one-sided test rejects exactly when the (1 - 2 alpha) interval's low end is above -margin
    lo90 = r.estimate - stats.t.ppf(0.975, r.df) * r.stderr
    assert r.noninferior == (lo90 > -0.05)
    assert r.ni_pvalue == pytest.approx(stats.t.sf((r.estimate + 0.05) / r.stderr, r.df))


def test_durkalski_against_its_sign_flip_distribution():
    """Under H0 each question's net difference D_i is as likely +D_i as -D_i; the χ² p must match
    the Monte Carlo sign-flip p of the same statistic when there are many questions."""
    rng = np.random.default_rng(3)
    a, b, ids = _data(rng, 300, 3, 0.55, 0.5)
    r = clustered_paired(a, b, ids)
    dsum = np.bincount(ids, weights=a.astype(float) - b)
    observed = dsum.sum() ** 2
    flips = rng.choice([-1.0, 1.0], size=(20000, len(dsum)))
    p_flip = float(np.mean((flips @ dsum) ** 2 >= observed - 1e-9))
    assert r.pvalue == pytest.approx(p_flip, abs=0.015)
    assert r.statistic == pytest.approx(observed / float(dsum @ dsum))


def _simulate(rng, reps, g, k):
    """H0 over questions but correlated within a question: question i favours arm A or B by a
    random amount (symmetric), the same for its k samples."""
    base = rng.uniform(0.2, 0.8, size=(reps, g, 1))
    tilt = rng.choice([-0.3, 0.3], size=(reps, g, 1)) * rng.random((reps, g, 1))
    u = rng.random((reps, g, k))
    a = u < np.clip(base + tilt, 0, 1)
    b = rng.random((reps, g, k)) < np.clip(base - tilt, 0, 1)
    return a, b


def test_type_one_error_holds_under_within_question_correlation():
    rng = np.random.default_rng(4)
    reps, g, k = 1500, 40, 4
    a, b = _simulate(rng, reps, g, k)
    ids = np.repeat(np.arange(g), k)
    clustered = naive = covered = 0
    for r_ in range(reps):
        res = clustered_paired(a[r_].ravel(), b[r_].ravel(), ids)
        clustered += res.pvalue < 0.05
        covered += res.ci_low <= 0 <= res.ci_high
        bo, co = int(np.sum(a[r_] & ~b[r_])), int(np.sum(~a[r_] & b[r_]))
        naive += mcnemar([[0, bo], [co, 0]], exact=False, correction=False).pvalue < 0.05
    assert 0.03 <= clustered / reps <= 0.07
    assert covered / reps >= 0.93
    assert naive / reps > 0.1  # treating the 160 samples as independent pairs does not hold α


def test_no_spread_between_questions_counts_each_question_once():
    """Coupled arms that agree on every sample: SE 0, so the interval is Tango's on G pairs (never
    a zero width) and NI the Tango/Nam test on them."""
    same = [True, False, True, True] * 10
    r = clustered_paired(same, same, np.repeat(np.arange(10), 4), margin=0.1)
    assert (r.estimate, r.pvalue, r.stderr) == (0.0, 1.0, 0.0) and "no spread" in r.note
    oracle = tango_ci(0, 0, 10)
    assert (r.ci_low, r.ci_high) == (oracle.ci_low, oracle.ci_high) and r.ci_high > 0.1
    assert r.ni_pvalue == noninferiority_test(0, 0, 10, margin=0.1).pvalue and not r.noninferior


def test_edge_cases():
    assert clustered_paired([1, 0], [0, 1], ["x", "y"]).margin is None
    with pytest.raises(ValueError, match="two questions"):
        clustered_paired([1, 0], [0, 1], ["x", "x"])
    with pytest.raises(ValueError, match="same length"):
        clustered_paired([1, 0], [0], ["x", "y"])
