"""Type I error of `evalkit ab`'s loss stop under "no loss", exact given the discordant counts.

For three equally spaced looks at question counts up to n_max and a per-question discordance psi,
draws the discordant counts at the looks (binomial increments, fixed seed) and, for each draw,
computes exactly the probability that the fair sign walk crosses the loss bound at some look:
for the exact rule (the sign walk's critical counts given the counts, `conditional_sign_walk`)
and for the normal approximation it replaced (z = (c - b)/sqrt(m) against the Lan-DeMets z bound).
The mean over draws is the type I error (Rao-Blackwellised: no sign-walk sampling noise); the
largest over draws is the worst size given the discordant counts, which a sequential design that
conditions on them (as the looks do) must keep <= alpha too.

    python scripts/ab_loss_type1.py > results/ab-exact-loss/type1.md
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy import stats

from evalkit.ab.looks import look_fractions, look_sizes
from evalkit.stats.sequential import conditional_sign_walk, normal_design


def _crossing(discordant: list[int], critical: list[int]) -> float:
    """Exact P(the fair walk's count reaches critical[k] at look k for some k)."""
    dist, prev, total = np.array([1.0]), 0, 0.0
    for m, r in zip(discordant, critical):
        dist = np.convolve(dist, stats.binom.pmf(np.arange(m - prev + 1), m - prev, 0.5))
        if r <= m:
            total += float(dist[r:].sum())
            dist = dist.copy()
            dist[r:] = 0.0
        prev = m
    return total


def _normal_critical(m: int, z: float) -> int:
    """Smallest baseline-only count c with (2c - m)/sqrt(m) >= z (m + 1: never)."""
    if m == 0:
        return 1
    return min(m + 1, max(0, math.ceil((m + z * math.sqrt(m)) / 2 - 1e-12)))


def main() -> int:
    looks, alpha, reps = 3, 0.025, 4000
    rng = np.random.default_rng(38)
    print(
        f"One-sided α {alpha}, {looks} equally spaced looks, {reps} draws of the discordant counts per row."
    )
    print()
    print(
        "| spending | n_max | ψ | exact rule: type I | worst given the counts "
        "| normal approx.: type I | worst given the counts |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for spending in ("obf", "pocock"):
        design = normal_design(look_fractions(looks), alpha, spending)
        for n_max in (40, 120, 344):
            sizes = look_sizes(n_max, looks)
            steps = np.diff([0, *sizes])
            for psi in (0.03, 0.1, 0.3):
                exact, normal = [], []
                for _ in range(reps):
                    m = np.cumsum(rng.binomial(steps, psi)).tolist()
                    walk = conditional_sign_walk(m, design.fractions, alpha, spending)
                    exact.append(walk.spent[-1])
                    normal.append(_crossing(m, [_normal_critical(x, z) for x, z in zip(m, design.bounds)]))
                print(
                    f"| {spending} | {n_max} | {psi:g} | {np.mean(exact):.5f} | {max(exact):.5f} | "
                    f"{np.mean(normal):.5f} | {max(normal):.5f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
