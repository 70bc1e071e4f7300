"""Reference values of the paired tests, to 6 decimals: copied from the project's statistics notes
(statistics.md, which lives outside this repository with the other reference notes: its section 8
table and the worked examples of sections 4-6), where each was computed with scipy/statsmodels and
an independent implementation. The published anchor [[59, 6], [16, 80]] and its intervals are from
the test suite of the R package contingencytables (tests/testthat/test-ch8.R; Fagerland, Lydersen
& Laake 2017, Statistical Analysis of Contingency Tables, ch. 8)."""

import math

import pytest

from evalkit import stats as st

R = 6  # decimals


def close(x, ref, places=R):
    return round(x, places) == pytest.approx(ref, abs=1e-12)


def test_mcnemar_gsm8k_18_21():
    r = st.mcnemar(18, 21)
    assert close(r.exact, 0.749259)
    assert close(r.midp, 0.635828)
    assert close(r.asymptotic, 0.630954)
    assert close(st.mcnemar_asymptotic(18, 21, correction=True).pvalue, 0.748774)


def test_mcnemar_no_discordant_is_one_with_a_note():
    for f in (st.mcnemar_exact, st.mcnemar_midp, st.mcnemar_asymptotic):
        r = f(0, 0)
        assert r.pvalue == 1.0
        assert "no discordant questions" in r.note
    assert "no discordant questions" in str(st.mcnemar(0, 0))


@pytest.mark.parametrize("b,c", [(0, 5), (5, 0)])
def test_mcnemar_0_5(b, c):
    r = st.mcnemar(b, c)
    assert close(r.exact, 0.0625) and close(r.midp, 0.03125) and close(r.asymptotic, 0.025347)


def test_published_anchor_table_59_6_16_80():
    a, b, c, d = 59, 6, 16, 80
    n = a + b + c + d
    r = st.mcnemar(b, c)
    assert close(r.exact, 0.052479) and close(r.midp, 0.034690) and close(r.asymptotic, 0.033006)
    assert close(st.mcnemar_asymptotic(b, c, correction=True).pvalue, 0.055009)
    t = st.tango_ci(b, c, n)
    assert (round(t.ci_low, 4), round(t.ci_high, 4)) == (-0.1240, -0.0054)
    nw = st.newcombe_ci(a, b, c, d)
    assert (round(nw.ci_low, 4), round(nw.ci_high, 4)) == (-0.1186, -0.0046)
    bp = st.bonett_price_ci(b, c, n)
    assert (round(bp.ci_low, 4), round(bp.ci_high, 4)) == (-0.1195, -0.0032)


def test_paired_intervals_gsm8k():
    t = st.tango_ci(18, 21, 1319)
    assert close(t.ci_low, -0.012062) and close(t.ci_high, 0.007329)
    nw = st.newcombe_ci(1255, 18, 21, 25)
    assert close(nw.phi, 0.535214)
    assert close(nw.ci_low, -0.012104) and close(nw.ci_high, 0.007428)
    for f, lo, hi in (
        (st.bonett_price_ci, -0.011771, 0.007229),
        (st.agresti_min_ci, -0.011654, 0.007112),
        (st.wald_ci, -0.011553, 0.007004),
    ):
        r = f(18, 21, 1319)
        assert close(r.ci_low, lo) and close(r.ci_high, hi), r


def test_tango_edge_cases():
    z = st.tango_ci(0, 0, 1319)
    assert close(z.ci_low, -0.002904) and close(z.ci_high, 0.002904)
    t = st.tango_ci(3, 0, 3)
    assert round(t.ci_low, 4) == -0.1230 and t.ci_high == 1.0


def test_wilson_and_lmeval_stderr():
    lo, hi = st.wilson_ci(1273, 1319)
    assert close(lo, 0.953796) and close(hi, 0.973753)
    assert close(st.lmeval_stderr(1265, 1319), 0.005458)


def test_noninferiority_gsm8k():
    r = st.noninferiority_test(18, 21, 1319, margin=0.01)
    assert close(r.statistic, 1.572942) and close(r.pvalue, 0.057866)
    assert not r.noninferior and "not shown" in r.verdict


def test_connor_mde_sample_size_and_power():
    psi = 39 / 1319
    assert close(psi, 0.029568)
    assert close(st.connor_mde(1319, psi).mde, 0.013253)
    assert round(st.connor_sample_size(0.01, psi), 1) == 2318.4
    assert round(st.connor_power(0.01, psi, 1319), 2) == 0.56
    mde = st.connor_mde(1319, psi).mde
    assert round(st.exact_power(mde, psi, 1319, mid_p=False), 3) == 0.771
    assert round(st.exact_power(mde, psi, 1319, mid_p=True), 3) == 0.812


@pytest.mark.parametrize("psi,mde_pp", [(0.01, 0.77), (0.02, 1.09), (0.03, 1.33), (0.05, 1.72), (0.10, 2.44)])
def test_mde_table(psi, mde_pp):
    assert round(100 * st.connor_mde(1319, psi).mde, 2) == mde_pp


def test_multiplicity_reference_vectors():
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.060, 0.074, 0.205]
    assert st.holm(p).adjusted == pytest.approx([0.008, 0.056, 0.234, 0.234, 0.234, 0.234, 0.234, 0.234])
    assert st.benjamini_hochberg(p).adjusted == pytest.approx(
        [0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.080, 0.084571, 0.205], abs=1e-6
    )


def test_cochran_armitage_reference():
    ca = st.cochran_armitage([3, 5, 9, 14], [100] * 4, [8, 9, 10, 11])
    assert close(ca.statistic, 3.094231) and close(ca.pvalue, 0.001973)
    ll = st.linear_by_linear([3, 5, 9, 14], [100] * 4, [8, 9, 10, 11])
    assert close(ll.statistic, 3.090360) and close(ll.pvalue, 0.001999)


def test_paired_se_gsm8k_miller_section4():
    # 1255 both right, 18 A only, 21 B only, 25 both wrong: paired SE 0.00474, unpaired 0.00703.
    d = [0] * 1255 + [1] * 18 + [-1] * 21 + [0] * 25
    r = st.clustered_se(d, list(range(len(d))))
    assert round(r.se_clt, 5) == 0.00474 and r.se_clustered == pytest.approx(r.se_clt)
    unpaired = math.hypot(st.lmeval_stderr(1273, 1319), st.lmeval_stderr(1276, 1319))
    assert round(unpaired, 5) == 0.00703


def test_results_print_readably():
    text = str(st.tango_ci(18, 21, 1319))
    assert "tango" in text and "-0.012062" in text
    assert st.noninferiority_test(18, 21, 1319).to_dict()["pvalue"] == pytest.approx(0.057866, abs=1e-6)
