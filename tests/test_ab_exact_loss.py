"""issue 38: `evalkit ab`'s loss decision is exact: the critical baseline-only counts given the
discordant counts at the looks match a brute-force enumeration of every sign sequence, the
fixed-seed simulated type I error stays <= alpha (where a naive exact test at every look does
not), and the repeated CI on the discordant share is Clopper-Pearson at each look's level."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from evalkit.ab.looks import exact_loss, judge_look, loss_share_ci
from evalkit.stats.sequential import conditional_sign_walk, normal_design


def _spent(t, alpha, spending):
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    return 2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(t))


def _brute_force(discordant, fractions, alpha, spending):
    """Critical counts by enumerating every sign sequence of the last look's length."""
    paths = list(itertools.product((0, 1), repeat=discordant[-1]))
    weight = 0.5 ** discordant[-1]
    stopped = [False] * len(paths)
    crossed, critical = 0.0, []
    for m, t in zip(discordant, fractions):
        counts = [sum(p[:m]) for p in paths]
        budget = _spent(t, alpha, spending) - crossed
        chosen = m + 1
        for r in range(m // 2 + 1, m + 1):  # a loss needs more than half the pairs to favour the baseline
            mass = sum(weight for c, s in zip(counts, stopped) if not s and c >= r)
            if mass <= budget * (1 + 1e-12):
                chosen = r
                break
        critical.append(chosen)
        for i, c in enumerate(counts):
            if not stopped[i] and c >= chosen:
                stopped[i] = True
                crossed += weight
    return critical, crossed


@pytest.mark.parametrize(
    "discordant, alpha, spending",
    [
        ((4, 9, 13), 0.2, "pocock"),
        ((6, 6, 12), 0.15, "obf"),
        ((0, 5, 11), 0.25, "pocock"),
        ((3, 8, 14), 0.05, "pocock"),
        ((7, 10, 14), 0.1, "obf"),
    ],
)
def test_the_critical_counts_match_a_brute_force_enumeration(discordant, alpha, spending):
    fractions = (1 / 3, 2 / 3, 1.0)
    want, total = _brute_force(discordant, fractions, alpha, spending)
    walk = conditional_sign_walk(discordant, fractions, alpha, spending)
    assert list(walk.critical) == want and walk.spent[-1] == pytest.approx(total)
    assert walk.spent[-1] <= alpha
    design = normal_design(fractions, alpha, spending)
    for k, m in enumerate(discordant):
        for base_only in range(m + 1):
            look = judge_look(
                design, k, m - base_only, base_only, 40, 0.05, earlier_discordant=discordant[:k]
            )
            assert (look["decision"] == "loss") == (base_only >= want[k]), (k, base_only)


def _simulate(n_looks, psi, alpha, spending, reps, seed, rule):
    rng = np.random.default_rng(seed)
    looks_at = np.array([20, 40, 60])[:n_looks]
    rejections = 0
    for _ in range(reps):
        disc = rng.random(60) < psi
        favour_base = rng.random(60) < 0.5  # H0: no loss
        seen = []
        for k, n in enumerate(looks_at):
            m, c = int(disc[:n].sum()), int((disc & favour_base)[:n].sum())
            seen.append(m)
            if rule(k, c, tuple(seen)):
                rejections += 1
                break
    return rejections / reps


def test_the_simulated_type_i_error_stays_within_alpha():
    design = normal_design((1 / 3, 2 / 3, 1.0), 0.1, "pocock")

    @functools.cache
    def walk(seen):
        return conditional_sign_walk(seen, design.fractions[: len(seen)], design.alpha, design.spending)

    def exact(k, c, seen):
        return walk(seen).rejects(k, c)

    reps = 20000
    rate = _simulate(3, 0.3, 0.1, "pocock", reps, 38, exact)
    assert rate <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / reps)
    # the same looks with a naive exact one-sided binomial test at alpha each time overshoot it
    naive = _simulate(
        3, 0.3, 0.1, "pocock", reps, 38, lambda k, c, s: stats.binom.sf(c - 1, s[-1], 0.5) <= 0.1
    )
    assert naive > 0.1 + 3 * math.sqrt(0.1 * 0.9 / reps)
    # and the runner's helper decides as the cached walk does
    assert exact_loss(design, 1, 9, [5, 10])[0] == walk((5, 10)).rejects(1, 9)


def test_the_repeated_ci_on_the_discordant_share_is_clopper_pearson_at_the_looks_level():
    design = normal_design((0.5, 1.0))
    for k, (c, m) in enumerate([(7, 10), (0, 12), (12, 12)]):
        bound = design.bounds[min(k, 1)]
        level = 1 - 2 * stats.norm.sf(bound)
        want = stats.binomtest(c, m).proportion_ci(confidence_level=level, method="exact")
        assert loss_share_ci(c, m, bound) == pytest.approx([want.low, want.high])
