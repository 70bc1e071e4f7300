"""issue 38: group-sequential designs (evalkit.stats.sequential) against published boundaries
(gsDesign values in decision-protocol.md section 4) and fixed-seed simulations of type I error and power."""

import math

import numpy as np
import pytest
from scipy import stats

from evalkit.stats import sequential as sq
from evalkit.stats.power import _ni_sds


def test_spending_functions_match_their_formulas_and_spend_alpha_at_t1():
    assert sq.spent_alpha(1.0, 0.025, "obf") == pytest.approx(0.025, abs=1e-12)
    assert sq.spent_alpha(1.0, 0.025, "pocock") == pytest.approx(0.025, abs=1e-12)
    # OBF at t = 1/3: 2 - 2 Phi(2.2414 * sqrt(3))
    assert sq.spent_alpha(1 / 3, 0.025) == pytest.approx(2 * stats.norm.sf(stats.norm.ppf(0.9875) * 3**0.5))
    with pytest.raises(ValueError):
        sq.spent_alpha(0.5, 0.025, "haybittle")


@pytest.mark.parametrize(
    "fractions, spending, expected",
    [
        ((1 / 3, 2 / 3, 1), "obf", (3.710, 2.511, 1.993)),
        ((1 / 3, 2 / 3, 1), "pocock", (2.279, 2.295, 2.296)),
        ((0.5, 1), "obf", (2.963, 1.969)),
        ((0.5, 1), "pocock", (2.157, 2.201)),
    ],
)
def test_normal_boundaries_match_gsdesign(fractions, spending, expected):
    design = sq.normal_design(fractions, 0.025, spending)
    assert design.bounds == pytest.approx(expected, abs=1.5e-3)
    assert design.spent[-1] == pytest.approx(0.025, abs=1e-9)


def test_obf_max_information_inflation():
    """Three LD-OBF looks need 1.013x the fixed-sample information for 80% power (gsDesign)."""
    design = sq.normal_design((1 / 3, 2 / 3, 1))
    drift = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert sq.normal_design_power(design, drift * math.sqrt(1.013)) == pytest.approx(0.80, abs=2e-3)
    assert sq.normal_design_power(design, 0.0) == pytest.approx(0.025, abs=1e-6)


def test_exact_sign_walk_boundaries_reference():
    design = sq.sign_walk_design((40, 80, 120), 0.025, "obf")
    assert design.critical == (32, 52, 72)
    assert design.total_alpha == pytest.approx(0.0193, abs=5e-5)
    assert sq.sign_walk_power(design, 0.5) == pytest.approx(design.total_alpha, rel=1e-12)


def _simulate_walk(design, p, reps, rng):
    steps = np.diff((0,) + design.looks)
    counts = np.cumsum(rng.binomial(steps, p, size=(reps, len(steps))), axis=1)
    return np.any(counts >= np.array(design.critical), axis=1).mean()


def test_sign_walk_type_one_error_and_power_by_simulation():
    rng = np.random.default_rng(38)
    design = sq.sign_walk_design((40, 80, 120), 0.025, "obf")
    reps = 40_000
    null = _simulate_walk(design, 0.5, reps, rng)
    se = math.sqrt(0.025 * 0.975 / reps)
    assert null <= 0.025 + 2 * se
    assert null == pytest.approx(design.total_alpha, abs=3 * math.sqrt(0.02 * 0.98 / reps))
    alt = _simulate_walk(design, 0.62, reps, rng)
    assert alt == pytest.approx(sq.sign_walk_power(design, 0.62), abs=3 * math.sqrt(0.25 / reps))


def test_naive_repeated_looks_inflate_but_the_design_does_not():
    """Three naive looks at z = 1.96 exceed alpha (0.054 two-sided-equivalent in the reference);
    the exact design stays at or below it: the test can fail if the boundaries were naive."""
    naive = sq.SignWalkDesign(
        (40, 80, 120),
        tuple(math.ceil((m + 1.959964 * math.sqrt(m)) / 2) for m in (40, 80, 120)),
        0.025,
        "naive",
        (0, 0, 0),
    )
    assert sq.sign_walk_power(naive, 0.5) > 0.035
    assert sq.sign_walk_design((40, 80, 120)).total_alpha <= 0.025


def _simulate_ni(design, n_max, psi, diff, margin, reps, rng):
    """Fraction of trials that conclude non-inferiority at some look (fixed seed)."""
    p10, p01 = (psi + diff) / 2, (psi - diff) / 2
    looks = [round(f * n_max) for f in design.fractions]
    steps = np.diff([0] + looks)
    wins = 0
    for _ in range(reps):
        b = c = 0
        for k, step in enumerate(steps):
            db, dc, _ = rng.multinomial(step, [p10, p01, 1 - p10 - p01])
            b, c = b + db, c + dc
            look = sq.noninferiority_look(design, k, int(b), int(c), looks[k], margin)
            if look.decision == sq.NONINFERIOR:
                wins += 1
                break
            if look.decision == sq.FUTILE:
                break  # non-binding: stopping here can only lower the rejection rate
    return wins / reps


def test_noninferiority_design_type_one_error_and_power_in_simulation():
    rng = np.random.default_rng(7)
    design = sq.normal_design((1 / 3, 2 / 3, 1), 0.025, "obf")
    psi, margin, reps = 0.10, 0.05, 3000
    # at the margin (H0 boundary) the type I error is at most alpha (up to Monte Carlo error)
    n_max = 300
    null = _simulate_ni(design, n_max, psi, -margin, margin, reps, rng)
    assert null <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / reps)
    # at diff 0 with the n the design needs for 80% power, the simulated power is near 0.8
    sd0, sd1 = _ni_sds(psi, margin, 0.0)
    drift_needed = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n_plan = math.ceil((drift_needed * 1.013**0.5 * (sd0 + sd1) / 2 / margin) ** 2)
    power = _simulate_ni(design, n_plan, psi, 0.0, margin, reps, rng)
    assert power == pytest.approx(0.80, abs=0.04)


def test_look_decisions_and_repeated_ci():
    design = sq.normal_design((0.5, 1.0))
    clear = sq.noninferiority_look(design, 0, 5, 5, 500, 0.05)
    assert clear.decision == sq.NONINFERIOR and clear.rci_low > -0.05
    hopeless = sq.noninferiority_look(design, 0, 0, 60, 300, 0.05)
    assert hopeless.decision == sq.FUTILE and hopeless.rci_high < -0.05
    undecided = sq.noninferiority_look(design, 0, 10, 14, 100, 0.05)
    assert undecided.decision == sq.CONTINUE
    assert sq.noninferiority_look(design, 1, 10, 14, 100, 0.05).decision == sq.INCONCLUSIVE
    # the repeated CI is wider than the fixed-sample 95% Tango CI at an early look
    from evalkit.stats import tango_ci

    fixed = tango_ci(10, 14, 100)
    assert undecided.rci_low < fixed.ci_low and undecided.rci_high > fixed.ci_high


def test_bad_designs_are_refused():
    with pytest.raises(ValueError):
        sq.sign_walk_design((80, 40))
    with pytest.raises(ValueError):
        sq.normal_design((0.5, 0.9))


def test_information_inflation_matches_gsdesign():
    assert sq.information_inflation(sq.normal_design((1 / 3, 2 / 3, 1))) == pytest.approx(1.013, abs=1e-3)
    pocock = sq.normal_design((1 / 3, 2 / 3, 1), spending="pocock")
    assert sq.information_inflation(pocock) == pytest.approx(1.171, abs=2e-3)
