"""Drift metrics against independent oracles (numpy, scipy, statsmodels)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import log_softmax as sp_log_softmax
from scipy.special import rel_entr

from evalkit.drift.accumulate import BucketStats
from evalkit.drift.free_running import agreement_after, first_divergence, health_flags, repeated_loop
from evalkit.drift.growth import fit_rate_growth
from evalkit.drift.positions import bucket_edges, bucket_of, checkpoints, format_position
from evalkit.drift.state_metrics import compare_states
from evalkit.drift.token_metrics import token_metrics


# ---- positions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("L", [1, 2, 7, 100, 1000, 4097])
def test_buckets_cover_every_position_once(L):
    e = bucket_edges(L, per_octave=2)
    assert e[0] == 1 and e[-1] == L + 1 and np.all(np.diff(e) > 0)
    b = bucket_of(np.arange(1, L + 1), e)
    assert b.min() == 0 and b.max() == len(e) - 2
    assert np.all(np.diff(b) >= 0)  # monotone: positions fill buckets in order


def test_buckets_are_log_spaced():
    e = bucket_edges(1 << 17, per_octave=2)
    big = e[e > 64]
    ratios = big[1:] / big[:-1]
    assert np.allclose(ratios[:-1], np.sqrt(2), rtol=0.02)


def test_checkpoints_snap_to_chunk_ends():
    cps = checkpoints(1000, 1, boundaries=np.arange(128, 1001, 128).tolist() + [1000])
    assert cps[-1] == 1000
    assert set(cps) <= set(range(128, 1001, 128)) | {1000}
    assert checkpoints(64, 1) == [1, 2, 4, 8, 16, 32, 64]
    assert format_position(131072) == "128k" and format_position(1536) == "1.5k"
    assert format_position(300) == "300"


# ---- bucket accumulation -----------------------------------------------------------------------
def test_bucket_stats_match_numpy():
    rng = np.random.default_rng(0)
    L = 3000
    pos = np.arange(1, L + 1)
    vals = rng.lognormal(-6, 2, size=L) * (rng.random(L) > 0.1)  # ~10% exact zeros
    st = BucketStats.for_length(L)
    for s in range(0, L, 173):  # arbitrary chunking must not matter
        st.add(pos[s : s + 173], vals[s : s + 173])
    b = bucket_of(pos, st.edges)
    for k in range(len(st.count)):
        v = vals[b == k]
        assert st.count[k] == v.size
        assert st.mean()[k] == pytest.approx(v.mean(), rel=1e-12)
        if v.size > 1:
            assert st.std()[k] == pytest.approx(v.std(ddof=1), rel=1e-8, abs=1e-300)
        assert st.maximum[k] == v.max()
        assert st.position()[k] == pytest.approx(np.exp(np.log(pos[b == k]).mean()), rel=1e-12)
        assert st.zeros[k] == int((v == 0).sum())
    # quantiles are exact order statistics, pooled and per bucket (not histogram bin edges)
    for q in (0.5, 0.99, 0.999):
        assert st.quantile(q, np.arange(len(st.count))) == np.quantile(vals, q)
        per = st.quantile(q)
        for k in range(len(st.count)):
            assert per[k] == np.quantile(vals[b == k], q)
    ov = st.overall()
    assert ov["n"] == L and ov["mean"] == pytest.approx(vals.mean()) and ov["max"] == vals.max()


def test_bucket_stats_count_nonfinite_apart():
    st = BucketStats.for_length(8)
    st.add(np.array([1, 2, 3]), np.array([1.0, np.nan, np.inf]))
    assert st.count.sum() == 1 and st.nonfinite.sum() == 2 and st.overall()["mean"] == 1.0


# ---- token metrics -----------------------------------------------------------------------------
def test_token_metrics_match_scipy_in_float64():
    g = torch.Generator().manual_seed(1)
    T, V = 9, 50
    ref = torch.randn(T, V, generator=g) * 3
    arm = ref + 0.3 * torch.randn(T, V, generator=g)
    arm[2] = ref[2]  # one identical row
    nxt = torch.randint(0, V, (T,), generator=g)
    nxt[-1] = -1
    m = token_metrics(ref, arm, nxt, max_bytes=V * 8 * 3 * 2)  # 2 rows per slice
    lr = sp_log_softmax(ref.double().numpy(), axis=-1)
    la = sp_log_softmax(arm.double().numpy(), axis=-1)
    kl = rel_entr(np.exp(lr), np.exp(la)).sum(-1)
    np.testing.assert_allclose(m.kl.numpy(), kl, rtol=1e-9, atol=1e-15)
    assert m.kl[2].item() == 0.0
    np.testing.assert_array_equal(m.top1.numpy(), (ref.argmax(-1) == arm.argmax(-1)).double().numpy())
    idx = nxt[:-1].numpy()
    np.testing.assert_allclose(m.nll_ref[:-1].numpy(), -lr[np.arange(T - 1), idx], rtol=1e-12)
    np.testing.assert_allclose(m.nll_arm[:-1].numpy(), -la[np.arange(T - 1), idx], rtol=1e-12)
    assert np.isnan(m.nll_ref[-1].item()) and not m.nonfinite.any()


def test_identical_logits_give_exactly_zero():
    x = torch.randn(5, 1000) * 10
    m = token_metrics(x, x.clone())
    assert torch.all(m.kl == 0) and torch.all(m.top1 == 1)


def test_nonfinite_arm_logits_are_flagged():
    x = torch.randn(3, 10)
    y = x.clone()
    y[1, 4] = float("nan")
    m = token_metrics(x, y)
    assert m.nonfinite.tolist() == [False, True, False] and np.isnan(m.kl[1].item())


# ---- state metrics -----------------------------------------------------------------------------
def test_compare_states_matches_numpy_and_counts_overflow():
    g = torch.Generator().manual_seed(2)
    ref = [torch.randn(2, 4, 4, generator=g) * 100 for _ in range(3)]
    arm = [r.to(torch.bfloat16) for r in ref]
    arm[2] = (ref[2] * 1000).to(torch.float16)  # values past 65504 become inf in fp16
    rows = compare_states(ref, arm)
    for r, a, row in zip(ref, arm, rows[:2]):
        d = a.double().numpy() - r.double().numpy()
        want = np.linalg.norm(d) / np.linalg.norm(r.double().numpy())
        assert row["rel_fro"] == pytest.approx(want, rel=1e-12)
        assert row["max_abs"] == pytest.approx(float(a.double().abs().max()))
    assert rows[0]["rel_fro"] > 0 and rows[0]["n_nonfinite"] == 0
    n_inf = int((ref[2].abs() * 1000 >= 65520).sum())
    assert n_inf > 0 and rows[2]["n_nonfinite"] == n_inf and rows[2]["rel_fro"] == float("inf")
    assert rows[2]["n_over_fp16"] == n_inf
    same = compare_states(ref, [r.clone() for r in ref])
    assert all(row["rel_fro"] == 0.0 for row in same)


# ---- free running ------------------------------------------------------------------------------
def test_divergence_and_agreement():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert agreement_after([1, 2, 3, 4], [1, 2, 9, 4], 2) == 0.5
    assert agreement_after([1, 2], [1, 2], None) is None


def test_repeated_loop_detection():
    rng = np.random.default_rng(3)
    varied = rng.integers(0, 1000, 200).tolist()
    assert repeated_loop(varied) is None
    bang = varied[:50] + [0] * 40
    lp = repeated_loop(bang)
    assert lp is not None and lp["period"] == 1 and lp["start"] == 50 and lp["length"] == 40
    phrase = varied[:30] + [5, 6, 7] * 20
    lp = repeated_loop(phrase)
    assert lp["period"] == 3 and lp["length"] >= 60
    assert repeated_loop(varied[:50] + [0] * 20) is None  # too short to call a loop
    assert health_flags(bang, nonfinite_logits=False, state_max_abs=70000.0, state_nonfinite=False) == [
        "overflow",
        "repetition",
    ]
    assert health_flags(varied, nonfinite_logits=True, state_max_abs=1.0, state_nonfinite=False) == ["nan"]


# ---- growth fits -------------------------------------------------------------------------------
def _bucketed(L, slope, noise, seed, zero_until=0):
    rng = np.random.default_rng(seed)
    pos = np.arange(1, L + 1)
    vals = 1e-4 * pos**slope * rng.lognormal(0, noise, L)
    vals[:zero_until] = 0
    st = BucketStats.for_length(L)
    st.add(pos, vals)
    return st


def test_rate_growth_matches_statsmodels_poisson_glm():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(8)
    L = 1 << 15
    pos = np.arange(1, L + 1)
    flips = (rng.random(L) < 2e-4 * (pos / 1000.0) ** 0.8).astype(float)
    st = BucketStats.for_length(L)
    st.add(pos, flips)
    use = st.position() >= 128
    f = fit_rate_growth(
        st.position(),
        st.total,
        st.count,
        metric="top1",
        label="flips",
        min_position=128,
        pos_lo=st.edges[:-1],
        pos_hi=st.edges[1:] - 1,
    )
    X = sm.add_constant(np.log(st.position()[use]))
    glm = sm.GLM(st.total[use], X, family=sm.families.Poisson(), offset=np.log(st.count[use])).fit()
    assert f.slope == pytest.approx(glm.params[1], rel=1e-8)
    pearson = glm.pearson_chi2 / glm.df_resid
    assert f.se == pytest.approx(glm.bse[1] * max(1.0, np.sqrt(pearson)), rel=1e-6)
    assert f.ci_low < 0.8 < f.ci_high and f.verdict == "grows" and "events" in f.text
    assert (st.total[use] == 0).any()  # zero buckets were kept in the fit
    none = fit_rate_growth(st.position(), np.zeros_like(st.total), st.count, metric="top1", min_position=128)
    assert none.verdict == "zero"


def test_rate_growth_with_every_event_in_one_bucket_has_no_slope():
    """The Poisson likelihood has no finite maximum then (the rate is 0 in every other bucket):
    'insufficient', not a singular-matrix crash."""
    pos = np.array([100.0, 200.0, 400.0, 800.0, 1600.0])
    f = fit_rate_growth(pos, np.array([0, 0, 0, 0, 9.0]), np.full(5, 100.0), metric="top1")
    assert f.verdict == "insufficient" and f.slope is None and "no finite trend" in f.text
