"""evalkit.stats against scipy / statsmodels / lm-eval and against its own defining properties."""

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats import contingency_tables as ct
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from evalkit import stats as st

BC = [(0, 1), (1, 0), (1, 1), (2, 7), (7, 7), (18, 21), (30, 12), (0, 40), (100, 130)]


@pytest.mark.parametrize("b,c", BC)
def test_mcnemar_matches_scipy_and_statsmodels(b, c):
    assert st.mcnemar_exact(b, c).pvalue == pytest.approx(sps.binomtest(b, b + c).pvalue, abs=1e-12)
    table = [[10, b], [c, 10]]
    assert st.mcnemar_exact(b, c).pvalue == pytest.approx(ct.mcnemar(table, exact=True).pvalue, abs=1e-12)
    asym = ct.mcnemar(table, exact=False, correction=False)
    assert st.mcnemar_asymptotic(b, c).pvalue == pytest.approx(asym.pvalue, abs=1e-12)
    if abs(b - c) >= 1:  # statsmodels does not clamp |b-c|-1 at 0 (the b = c bug)
        cc = ct.mcnemar(table, exact=False, correction=True)
        assert st.mcnemar_asymptotic(b, c, correction=True).pvalue == pytest.approx(cc.pvalue, abs=1e-12)


def test_corrected_mcnemar_clamps_where_statsmodels_does_not():
    assert st.mcnemar_asymptotic(7, 7, correction=True).pvalue == 1.0
    assert ct.mcnemar([[1, 7], [7, 1]], exact=False, correction=True).pvalue < 0.8


@pytest.mark.parametrize("b,c", BC)
def test_midp_is_exact_minus_half_the_observed_point_twice(b, c):
    # Fagerland 2013 / contingencytables: mid-p = 2 (P[X < k] + P[X = k]/2), k = min(b, c), for b != c;
    # for b = c the exact p is 1 and the mid-p is 1 - P[X = b]/2.
    m, k = b + c, min(b, c)
    if b == c:
        expected = 1 - 0.5 * sps.binom.pmf(b, m, 0.5)
    else:
        expected = 2 * (sps.binom.cdf(k - 1, m, 0.5) + 0.5 * sps.binom.pmf(k, m, 0.5))
    assert st.mcnemar_midp(b, c).pvalue == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("k,n", [(0, 1), (0, 10), (3, 10), (10, 10), (1273, 1319), (57, 200)])
def test_wilson_matches_statsmodels(k, n):
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert st.wilson_ci(k, n) == pytest.approx((lo, hi), abs=1e-12)


@pytest.mark.parametrize("k,n", [(1, 5), (0, 3), (1265, 1319), (50, 51)])
def test_lmeval_stderr_is_lm_eval_mean_stderr(k, n):
    from lm_eval.api.metrics import mean_stderr

    assert st.lmeval_stderr(k, n) == pytest.approx(mean_stderr([1.0] * k + [0.0] * (n - k)), abs=1e-12)


@pytest.mark.parametrize(
    "b,c,n", [(18, 21, 1319), (0, 5, 50), (5, 0, 50), (3, 9, 40), (0, 0, 100), (12, 2, 30)]
)
def test_tango_ci_is_the_inverted_score_test(b, c, n):
    ci = st.tango_ci(b, c, n)
    z = sps.norm.ppf(0.975)
    for end, target in ((ci.ci_low, z), (ci.ci_high, -z)):
        if abs(end) < 1:
            assert st.tango_score(b, c, n, end) == pytest.approx(target, abs=1e-7)
    # S(0) is McNemar's uncorrected z, so the CI excludes 0 exactly when the asymptotic p < 0.05.
    if b + c:
        assert st.tango_score(b, c, n, 0.0) == pytest.approx((b - c) / np.sqrt(b + c))
        excludes_zero = ci.ci_low > 0 or ci.ci_high < 0
        assert excludes_zero == (st.mcnemar_asymptotic(b, c).pvalue < 0.05)


@pytest.mark.parametrize("b,c,n", [(18, 21, 1319), (3, 9, 400), (12, 2, 300)])
@pytest.mark.parametrize("margin", [0.005, 0.01, 0.03])
def test_noninferiority_agrees_with_tango_ci_and_tost(b, c, n, margin):
    ni = st.noninferiority_test(b, c, n, margin=margin, alpha=0.025)
    ci95 = st.tango_ci(b, c, n, 0.95)
    assert ni.noninferior == (ci95.ci_low > -margin)
    eq = st.tost(b, c, n, margin=margin, alpha=0.05)
    ci90 = st.tango_ci(b, c, n, 0.90)
    assert eq.equivalent == (ci90.ci_low > -margin and ci90.ci_high < margin)


def test_newcombe_phi_rules():
    from evalkit.stats.paired_ci import newcombe_phi

    assert newcombe_phi(0, 5, 5, 0) < 0  # D < 0
    assert newcombe_phi(10, 0, 0, 0) == 0  # empty margin
    assert newcombe_phi(2, 1, 1, 2) == 0  # 0 <= D <= n/2
    assert newcombe_phi(3, 1, 1, 3) == pytest.approx((8 - 4) / 16)  # D > n/2: (D - n/2)/sqrt(margins)


def test_exact_power_matches_monte_carlo():
    rng = np.random.default_rng(1)
    n, psi, delta = 400, 0.06, 0.04
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    counts = rng.multinomial(n, [p10, p01, 1 - psi], size=20000)
    rejected = np.mean([st.mcnemar_midp(int(b), int(c)).pvalue <= 0.05 for b, c, _ in counts])
    assert st.exact_power(delta, psi, n, mid_p=True) == pytest.approx(rejected, abs=0.015)


def test_connor_power_inverts_sample_size():
    n = st.connor_sample_size(0.02, 0.05)
    assert st.connor_power(0.02, 0.05, int(np.ceil(n))) == pytest.approx(0.8, abs=0.01)
    mde = st.connor_mde(1000, 0.05)
    assert st.connor_sample_size(mde.mde, 0.05) == pytest.approx(1000, rel=1e-6)


def test_mde_unresolvable_is_said():
    r = st.connor_mde(10, 0.01)
    assert "not resolvable" in r.note


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holm_bh_match_statsmodels_and_scipy(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, size=15)
    assert st.holm(p).adjusted == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)
    assert st.benjamini_hochberg(p).adjusted == pytest.approx(multipletests(p, method="fdr_bh")[1], abs=1e-12)
    assert st.benjamini_hochberg(p).adjusted == pytest.approx(sps.false_discovery_control(p), abs=1e-12)


def test_linear_by_linear_matches_statsmodels():
    succ, tot, scores = [3, 5, 9, 14], [100, 90, 110, 100], [10, 11, 12, 13]
    table = np.column_stack([succ, np.subtract(tot, succ)])
    res = ct.Table(table).test_ordinal_association(
        row_scores=np.array(scores, float), col_scores=np.array([1.0, 0.0])
    )
    ll = st.linear_by_linear(succ, tot, scores)
    assert ll.statistic == pytest.approx(res.zscore, abs=1e-10)
    assert ll.pvalue == pytest.approx(res.pvalue, abs=1e-10)


def test_cochran_armitage_degenerate_bins():
    r = st.cochran_armitage([0, 0, 0], [10, 10, 10])
    assert r.pvalue == 1.0 and "no trend" in r.note


def test_clustered_se_against_statsmodels_ols_cluster():
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(60), 5)
    s = (rng.random(300) < np.where(rng.random(60) < 0.5, 0.9, 0.1)[clusters]).astype(float)
    r = st.clustered_se(s, clusters)
    fit = sm.OLS(s, np.ones(300)).fit(
        cov_type="cluster", cov_kwds={"groups": clusters, "use_correction": False}
    )
    # statsmodels (no correction): sum_c (sum_i e)^2 / n^2; Miller swaps the diagonal's 1/n^2 for 1/(n(n-1)).
    e = s - s.mean()
    expected = fit.bse[0] ** 2 + e @ e * (1 / (300 * 299) - 1 / 300**2)
    assert r.se_clustered**2 == pytest.approx(expected, rel=1e-10)
    assert r.se_clustered > 1.3 * r.se_clt  # clustered questions: naive SE is too small


def _newton_logit(y, x, iters=50):
    beta = np.zeros(x.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-x @ beta))
        beta += np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]), x.T @ (y - p))
    return beta, 1 / (1 + np.exp(-x @ beta))


def _sandwich_se(y, x, p, groups):
    bread = np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))
    scores = x * (y - p)[:, None]
    meat = sum(np.outer(scores[groups == g].sum(0), scores[groups == g].sum(0)) for g in np.unique(groups))
    g, n, k = len(np.unique(groups)), len(y), x.shape[1]
    cov = bread @ meat @ bread * g / (g - 1) * (n - 1) / (n - k)
    return np.sqrt(np.diag(cov))


def _long_context_data(seed, slope):
    rng = np.random.default_rng(seed)
    lengths = np.array([1024, 4096, 16384, 65536])
    rows = []
    for q in range(250):
        ease = rng.normal()
        for i, length in enumerate(lengths):
            logit_b = 1.5 + ease - 0.3 * i
            logit_c = logit_b - slope * i
            rows.append(
                (
                    q,
                    length,
                    rng.random() < 1 / (1 + np.exp(-logit_b)),
                    rng.random() < 1 / (1 + np.exp(-logit_c)),
                )
            )
    return rows


def test_logistic_trend_matches_hand_written_sandwich():
    rows = _long_context_data(5, slope=0.4)
    y = np.array([v for q, l, b, c in rows for v in (b, c)], float)
    arm = np.array([a for _ in rows for a in (0, 1)], float)
    ln = np.array([l for q, l, b, c in rows for _ in (0, 1)], float)
    cl = np.array([q for q, l, b, c in rows for _ in (0, 1)])
    r = st.logistic_trend_clustered(y, arm, ln, cl)
    xc = np.log2(ln) - np.log2(ln).mean()
    x = np.column_stack([np.ones_like(y), arm, xc, arm * xc])
    beta, p = _newton_logit(y, x)
    assert r.coef == pytest.approx(beta[3], abs=1e-8)
    assert r.stderr == pytest.approx(_sandwich_se(y, x, p, cl)[3], rel=1e-6)
    assert r.pvalue < 0.01 and r.coef < 0  # planted: candidate loses ground as length doubles


def test_logistic_trend_null_and_degenerate():
    rows = _long_context_data(6, slope=0.0)
    y = [v for q, l, b, c in rows for v in (b, c)]
    arm = [a for _ in rows for a in (0, 1)]
    ln = [l for q, l, b, c in rows for _ in (0, 1)]
    cl = [q for q, l, b, c in rows for _ in (0, 1)]
    assert st.logistic_trend_clustered(y, arm, ln, cl).pvalue > 0.05
    one = st.logistic_trend_clustered([1, 0, 1, 1], [0, 1, 0, 1], [8, 8, 8, 8], [1, 1, 2, 2])
    assert np.isnan(one.pvalue) and "one length" in one.note
    sep = st.logistic_trend_clustered(
        [1, 1, 1, 1, 0, 0, 0, 0], [0, 1] * 4, [8, 8, 8, 8, 16, 16, 16, 16], [1, 1, 2, 2, 1, 1, 2, 2]
    )
    assert np.isnan(sep.pvalue) and "not estimable" in sep.note


def test_conditional_trend_matches_newton_and_reports_separation():
    rows = _long_context_data(7, slope=0.5)
    disc = [(q, l, c) for q, l, b, c in rows if b != c]
    y = np.array([float(c) for _, _, c in disc])
    ln = np.array([float(l) for _, l, _ in disc])
    r = st.conditional_logistic_trend(y, ln, [q for q, _, _ in disc])
    beta, _ = _newton_logit(y, np.column_stack([np.ones_like(y), np.log2(ln) - np.log2(ln).mean()]))
    assert r.coef == pytest.approx(beta[1], abs=1e-8)
    assert r.coef < 0
    same = st.conditional_logistic_trend([1, 1, 1, 1], [8, 16, 32, 64])
    assert np.isnan(same.pvalue) and "same way" in same.note


def test_public_names_are_never_shadowed_by_submodules():
    """Lazy loading: a submodule named like a public function would replace it once imported."""
    import importlib
    import pkgutil
    import types

    for info in pkgutil.iter_modules(st.__path__):
        importlib.import_module(f"evalkit.stats.{info.name}")
    for name in st.__all__:
        assert not isinstance(getattr(st, name), types.ModuleType), name


# Holm, Benjamini-Hochberg and Wilson are statsmodels' own since they replaced the hand-written
# forms: the checks above test the wiring, these the values against the textbook definitions.
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_holm_equals_its_definition(seed):
    p = np.round(np.random.default_rng(seed).uniform(0, 0.1, size=12), 3)  # ties included
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    expected, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        expected[i] = running
    r = st.holm(p)
    assert r.adjusted == pytest.approx(expected, abs=1e-15)
    assert r.reject == tuple(a <= 0.05 for a in expected) and r.method == "holm"


@pytest.mark.parametrize("k,n,conf", [(0, 10, 0.95), (3, 10, 0.9), (10, 10, 0.99), (1273, 1319, 0.95)])
def test_wilson_equals_its_closed_form(k, n, conf):
    z = sps.norm.ppf(0.5 + conf / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert st.wilson_ci(k, n, conf) == pytest.approx(
        (max(0, centre - half), min(1, centre + half)), abs=1e-14
    )


def test_wilson_of_no_questions_and_empty_families():
    assert st.wilson_ci(0, 0) == (0.0, 1.0)
    assert st.holm([]).adjusted == () and st.benjamini_hochberg([]).adjusted == ()
