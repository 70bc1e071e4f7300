"""Exact power and sample size of the paired tests a plan gates on, by enumeration of the outcomes.

Loss detection: the exact conditional McNemar test (two-sided), power by enumeration over the
discordant count m ~ Bin(n, psi) and b | m (`power.exact_power`, mid_p=False). Non-inferiority:
the Tango/Nam score test at -margin; there is no exact conditional NI test (psi is a nuisance),
so its *power* is made exact instead: the trinomial (b, c, rest) is enumerated and the test's
own rejection region summed. Connor's and the normal formulas are kept as labelled approximations.

Power of a discrete test is saw-toothed in n: `n` here is found by bisection on the exact power
(smallest n of the bisection whose exact power reaches the target), and the exact power at that
n is reported with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from evalkit.stats._result import Result
from evalkit.stats.power import connor_sample_size, exact_power, noninferiority_sample_size

_TAIL = 1e-12  # probability mass of m left out of the enumeration on each side


def tango_scores(b: np.ndarray, c: np.ndarray, n: int, theta: float) -> np.ndarray:
    """Vectorised Tango score S(theta) (same formula as `paired_ci.tango_score`)."""
    b = np.asarray(b, dtype=float)
    c = np.asarray(c, dtype=float)
    qa = 2.0 * n
    qb = -b - c + (2.0 * n - b + c) * theta
    qc = -c * theta * (1.0 - theta)
    p21 = (np.sqrt(np.maximum(0.0, qb * qb - 4.0 * qa * qc)) - qb) / (2.0 * qa)
    var = n * (2.0 * p21 + theta * (1.0 - theta))
    num = b - c - n * theta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(np.where(var > 0, var, 1.0)), np.sign(num) * np.inf)
    return z


def exact_noninferiority_power(
    psi: float, margin: float, n: int, diff: float = 0.0, alpha: float = 0.025
) -> float:
    """Exact power of the one-sided Tango/Nam NI test at n pairs (b = A-only right, P = (psi + diff)/2)."""
    if not 0.0 < psi <= 1.0:
        raise ValueError(f"discordance rate psi must be in (0, 1], got {psi}")
    if abs(diff) > psi:
        raise ValueError(f"|diff| cannot exceed the discordance psi, got diff={diff}, psi={psi}")
    z_crit = stats.norm.ppf(1.0 - alpha)
    q = (psi + diff) / (2.0 * psi)
    m_lo = max(0, int(stats.binom.ppf(_TAIL, n, psi)))
    m_hi = min(n, int(stats.binom.isf(_TAIL, n, psi)) + 1)
    total = 0.0
    for m in range(m_lo, m_hi + 1):
        b = np.arange(m + 1)
        reject = tango_scores(b, m - b, n, -margin) >= z_crit
        if reject.any():
            total += float(stats.binom.pmf(m, n, psi) * stats.binom.pmf(b[reject], m, q).sum())
    return min(1.0, total)


def _bisect_n(power_at: Callable[[int], float], target: float, start: float, n_cap: int) -> int | None:
    """Smallest n (by bisection, assuming power rises with n) with power_at(n) >= target."""
    hi = max(2, math.ceil(start))
    while power_at(hi) < target:
        if hi >= n_cap:
            return None
        hi = min(n_cap, hi * 2)
    lo = max(1, hi // 4)
    while lo > 1 and power_at(lo) >= target:
        lo = max(1, lo // 2)
    if power_at(lo) >= target:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= target else (mid, hi)
    return hi


@dataclass(frozen=True)
class ExactSampleSize(Result):
    test: str  # "noninferiority" or "loss"
    n: int | None  # None: not reachable below n_cap
    power: float | None  # exact power at n
    n_approx: int  # the normal (NI) or Connor (loss) approximation, labelled as such
    approx_method: str
    psi: float
    effect: float  # the NI margin, or the loss to detect
    target_power: float
    alpha: float
    title: ClassVar[str] = "Exact sample size (enumeration)"


def exact_noninferiority_n(
    psi: float, margin: float, power: float = 0.8, alpha: float = 0.025, n_cap: int = 200_000
) -> ExactSampleSize:
    """Pairs for the Tango/Nam NI test at -margin to reach `power` when the true difference is 0."""
    approx = math.ceil(noninferiority_sample_size(psi, margin, 0.0, power, alpha))
    at = lambda k: float(exact_noninferiority_power(psi, margin, k, 0.0, alpha))
    n = _bisect_n(at, power, approx, n_cap)
    return ExactSampleSize(
        "noninferiority",
        n,
        None if n is None else at(n),
        approx,
        "normal (Nam/Tango)",
        psi,
        margin,
        power,
        alpha,
    )


def exact_loss_n(
    psi: float, loss: float, power: float = 0.8, alpha: float = 0.05, n_cap: int = 200_000
) -> ExactSampleSize:
    """Pairs for the two-sided exact conditional McNemar test to detect a loss `loss` at discordance psi."""
    psi = max(psi, loss)
    approx = math.ceil(connor_sample_size(loss, psi, power, alpha))
    at = lambda k: float(exact_power(loss, psi, k, alpha, mid_p=False))
    n = _bisect_n(at, power, approx, n_cap)
    return ExactSampleSize(
        "loss", n, None if n is None else at(n), approx, "Connor 1987", psi, loss, power, alpha
    )
