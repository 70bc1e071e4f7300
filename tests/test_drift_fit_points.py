"""Fit points: a prompt's buckets merged so a growth fit and an "at L1" ratio read fair samples.

The two artefacts `evalkit.drift.fit_points` removes, each shown to bias the raw-bucket fit (so
the tests can fail): a one-position last bucket at a power-of-two length under a heavy-tailed
metric, and the sawtooth of a state rounded once per prefill chunk. Merging is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.drift.accumulate import BucketStats
from evalkit.drift.across import ols_slope
from evalkit.drift.fit_points import fit_points

A = 0.5  # the true exponent


def _slope_raw(rows, start):
    return ols_slope([r["position"] for r in rows], [r["mean"] for r in rows], start)[0]


def _slope_fit(points, start):
    return ols_slope([p.position for p in points], [p.mean for p in points], start)[0]


def _stats(values: np.ndarray) -> BucketStats:
    st = BucketStats.for_length(len(values))
    st.add(np.arange(1, len(values) + 1), values)
    return st


def test_merging_is_exact():
    rng = np.random.default_rng(0)
    L, C = 4096, 256
    v = rng.lognormal(0, 1, L)
    st = _stats(v)
    pts = fit_points(st.rows(), C)
    assert pts[0].pos_lo == 1 and pts[-1].pos_hi == L
    assert all(a.pos_hi + 1 == b.pos_lo for a, b in zip(pts, pts[1:]))  # a partition
    for p in pts[:-1]:
        assert (p.pos_hi + 1) % C == 0  # whole chunks (up to the one position of the edges)
    p = np.arange(1, L + 1)
    for pt in pts:
        sel = (p >= pt.pos_lo) & (p <= pt.pos_hi)
        assert pt.n == sel.sum()
        assert pt.mean == pytest.approx(v[sel].mean(), rel=1e-12)
        assert pt.position == pytest.approx(np.exp(np.log(p[sel]).mean()), rel=1e-12)
    # decode mode (no chunk): the raw buckets, but for the one-position last bucket
    raw = st.rows()
    assert raw[-1]["pos_lo"] == raw[-1]["pos_hi"] == L
    dec = fit_points(raw)
    assert len(dec) == len(raw) - 1 and dec[-1].pos_lo == raw[-2]["pos_lo"] and dec[-1].pos_hi == L


def test_a_one_position_last_bucket_no_longer_biases_the_fit():
    """Heavy-tailed per-position values (lognormal, sigma 2): a bucket's mean sits e^2 above a
    typical single value, so the last position alone pulls the raw fit far below the truth."""
    raw, fit = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        p = np.arange(1, 2049)
        st = _stats(p**A * rng.lognormal(0, 2, p.size))
        raw.append(_slope_raw(st.rows(), 256))
        fit.append(_slope_fit(fit_points(st.rows()), 256))
    se = np.std(fit, ddof=1) / np.sqrt(len(fit))
    assert abs(np.mean(fit) - A) < 3 * se + 0.02
    assert np.mean(raw) < A - 0.3  # what the merge removes


def test_prefill_points_average_whole_chunks_of_the_sawtooth():
    """Error largest right after each chunk's store, decaying within the chunk: buckets that cut
    chunks sample phases of that cycle; whole-chunk points see the power law."""
    L, C = 8192, 256
    p = np.arange(1, L + 1)
    v = p**A * (1 + 30 * np.exp(-((p - 1) % C) / 8.0))
    v[p <= C] = 0.0  # the first chunk never reads a rounded state
    st = _stats(v)
    assert abs(_slope_fit(fit_points(st.rows(), C), C + 1) - A) < 0.04
    assert abs(_slope_raw(st.rows(), C + 1) - A) > 0.06


def test_a_chunk_size_the_edges_never_meet_still_gives_points():
    st = _stats(np.arange(1, 32769, dtype=float) ** A)
    pts = fit_points(st.rows(), 1000)
    assert len(pts) >= 4 and all(p.width >= 2000 for p in pts)
    assert _slope_fit(pts, 2048) == pytest.approx(A, abs=0.02)
