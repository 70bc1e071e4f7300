"""issue 38: exact power and n for a plan (decision-protocol.md section 3), against fixed-seed
simulations of the tests themselves (statsmodels' McNemar for the exact conditional test)."""

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from evalkit.stats import connor_power, exact_power
from evalkit.stats.exact_sample_size import (
    exact_loss_n,
    exact_noninferiority_n,
    exact_noninferiority_power,
    tango_scores,
)
from evalkit.stats.paired_ci import tango_score


def test_vectorised_tango_score_matches_the_scalar_one():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 400))
        b, c = sorted(rng.integers(0, n + 1, size=2))
        c = min(c, n - b)
        theta = float(rng.uniform(-0.3, 0.3))
        assert tango_scores(np.array([b]), np.array([c]), n, theta)[0] == pytest.approx(
            tango_score(int(b), int(c), n, theta), rel=1e-12, abs=1e-12
        )


def _simulated_exact_mcnemar_power(n, p10, p01, reps, rng):
    counts = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=reps)
    rejected = 0
    for b, c, _ in counts:
        if b + c and sm_mcnemar([[0, b], [c, 0]], exact=True).pvalue <= 0.05:
            rejected += 1
    return rejected / reps


@pytest.mark.parametrize("psi, p10, p01, table", [(0.10, 0.10, 0.0, 0.206), (0.20, 0.15, 0.05, 0.172)])
def test_exact_power_at_n40_for_a_10pp_loss_matches_table_and_simulation(psi, p10, p01, table):
    exact = exact_power(0.10, psi, 40, mid_p=False)
    assert round(exact, 3) == table
    simulated = _simulated_exact_mcnemar_power(40, p10, p01, 4000, np.random.default_rng(40))
    assert simulated == pytest.approx(exact, abs=0.02)
    # Connor's approximation overstates it (0.517 / 0.288 in the table)
    assert connor_power(0.10, psi, 40) > exact + 0.1


def test_exact_noninferiority_power_matches_simulation():
    psi, margin, n = 0.10, 0.05, 300
    counts = np.random.default_rng(3).multinomial(n, [psi / 2, psi / 2, 1 - psi], size=6000)
    z = tango_scores(counts[:, 0], counts[:, 1], n, -margin)
    assert exact_noninferiority_power(psi, margin, n) == pytest.approx(np.mean(z >= 1.959964), abs=0.015)


def test_exact_loss_n_is_the_first_n_with_the_target_power():
    res = exact_loss_n(0.20, 0.10)
    assert res.power >= 0.8 > exact_power(0.10, 0.20, res.n - 1, mid_p=False)
    assert 160 <= res.n <= 175  # decision-protocol.md: exact n 170, Connor 155
    assert res.n_approx == 155 and res.approx_method == "Connor 1987"


def test_exact_noninferiority_n_reaches_the_power_and_differs_from_the_normal_formula():
    res = exact_noninferiority_n(0.03, 0.01)
    assert res.power >= 0.8 > exact_noninferiority_power(0.03, 0.01, res.n - 1)
    assert res.n_approx == 2510  # statistics.md: ~2,510 by the normal formula
    assert res.n != res.n_approx
