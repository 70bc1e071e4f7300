"""issue 38: the paired continuous measure's pre-stated tail rule (bootstrap BCa of the mean vs
signed-rank/Hodges-Lehmann), its validity by fixed-seed simulation, and fixed-sequence testing
(decision-protocol.md sections 2 and 5)."""

import numpy as np
import pytest

from evalkit import stats as st
from evalkit.stats.robust_paired import choose_primary, robust_noninferiority


def _heavy(rng, n):
    """decision-protocol.md section 5: 5% of questions diverge by -lognormal(-1, 1.2), the rest
    N(0, 0.02^2)."""
    d = rng.normal(0, 0.02, n)
    diverge = rng.random(n) < 0.05
    d[diverge] = -rng.lognormal(-1, 1.2, diverge.sum())
    return d


def test_the_rule_picks_signed_rank_for_heavy_tails_and_zero_inflation():
    rng = np.random.default_rng(0)
    assert choose_primary(rng.normal(0, 0.01, 400))[0] == "bca-bootstrap"
    method, reason, kurt, _ = choose_primary(_heavy(rng, 400))
    assert method == "signed-rank" and kurt > 3 and "kurtosis" in reason
    zeros = np.where(rng.random(400) < 0.7, 0.0, rng.normal(0, 0.01, 400))
    method, reason, _, share = choose_primary(zeros)
    assert method == "signed-rank" and share >= 0.5 and "exactly 0" in reason


def test_signed_rank_path_matches_scipy_and_hodges_lehmann_by_brute_force():
    from scipy import stats

    d = _heavy(np.random.default_rng(1), 200)
    res = robust_noninferiority(d, 0.01)
    assert res.method == "signed-rank"
    assert res.pvalue == pytest.approx(stats.wilcoxon(d + 0.01, alternative="greater").pvalue, rel=1e-12)
    walsh = [(d[i] + d[j]) / 2 for i in range(d.size) for j in range(i, d.size)]
    assert res.estimate == pytest.approx(np.median(walsh), abs=1e-15)
    assert res.lower_bound < res.estimate


def test_signed_rank_noninferiority_holds_its_level_at_the_margin():
    """d symmetric about -margin (H0 boundary for the pseudo-median), heavy-tailed: rejection <= alpha."""
    rng = np.random.default_rng(2)
    margin, reps, n = 0.01, 300, 60
    rejected = 0
    for _ in range(reps):
        d = -margin + rng.standard_t(2, n) * 0.01
        res = robust_noninferiority(d, margin)
        rejected += res.noninferior
    assert rejected / reps <= 0.025 + 2 * np.sqrt(0.025 * 0.975 / reps)


def test_bca_lower_bound_covers_the_mean_in_simulation():
    rng = np.random.default_rng(3)
    reps, covered = 150, 0
    for _ in range(reps):
        d = rng.gamma(25.0, 0.002, 150) - 0.05  # skewed, mean 0, excess kurtosis 0.24
        res = robust_noninferiority(d, 0.01, resamples=999, seed=int(rng.integers(1 << 30)))
        assert res.method == "bca-bootstrap"
        covered += res.lower_bound <= 0.0
    assert covered / reps >= 0.975 - 3 * np.sqrt(0.975 * 0.025 / reps)


def test_clustering_by_document_undoes_duplicated_questions():
    """Each question duplicated within its document: the clustered bootstrap equals the bootstrap
    of the originals, where an iid bootstrap of the duplicates would be too narrow."""
    d = np.random.default_rng(4).normal(-0.002, 0.01, 80)
    plain = robust_noninferiority(d, 0.01)
    doubled = np.repeat(d, 2)
    clustered = robust_noninferiority(doubled, 0.01, clusters=np.repeat(np.arange(80), 2))
    naive = robust_noninferiority(doubled, 0.01)
    assert clustered.clusters == 80
    assert clustered.lower_bound == pytest.approx(plain.lower_bound, rel=1e-9)
    assert naive.lower_bound > clustered.lower_bound


def test_all_zero_differences_are_noninferior_and_bad_input_is_refused():
    assert robust_noninferiority(np.zeros(10), 0.01).noninferior
    with pytest.raises(ValueError):
        robust_noninferiority([0.1, np.nan], 0.01)
    with pytest.raises(ValueError):
        robust_noninferiority([0.1, 0.2, 0.3], 0.0)


def test_fixed_sequence_on_the_precision_ladder():
    """decision-protocol.md section 2: p = .004/.019/.031/.41 at alpha .025 (fp16, bf16, e4m3, e5m2):
    fixed sequence passes fp16 and bf16; Holm passes only fp16."""
    p = [0.004, 0.019, 0.031, 0.41]
    assert st.fixed_sequence(p, 0.025).reject == (True, True, False, False)
    assert st.holm(p, 0.025).reject == (True, False, False, False)
    # stops at the first failure even if a later p is tiny
    assert st.fixed_sequence([0.01, 0.2, 0.001], 0.025).reject == (True, False, False)
