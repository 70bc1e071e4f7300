"""Power, minimum detectable effect and sample size of a paired binary comparison.

Connor (1987): with discordance psi = P(A only) + P(B only) and true difference delta,
n = [z_{1-a/2} sqrt(psi) + z_{1-b} sqrt(psi - delta^2)]^2 / delta^2. The MDE inverts it for
delta at given n and psi. `exact_power` enumerates the conditional exact or mid-p McNemar test
(m ~ Bin(n, psi), b | m ~ Bin(m, p10/psi)) as SAS PROC POWER does: cheap for n up to ~10^4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import optimize, stats

from evalkit.stats._result import Result


def _check_psi(psi: float) -> None:
    if not 0.0 < psi <= 1.0:
        raise ValueError(f"discordance rate psi must be in (0, 1], got {psi}")


def _check_delta(delta: float, psi: float) -> None:
    if not 0.0 < abs(delta) <= psi:
        raise ValueError(
            f"need 0 < |delta| <= psi (a difference cannot exceed the discordance), "
            f"got delta={delta}, psi={psi}"
        )


def connor_power(delta: float, psi: float, n: int, alpha: float = 0.05) -> float:
    """Approximate power of the two-sided McNemar z-test (Connor 1987), both tails."""
    _check_psi(psi)
    _check_delta(delta, psi)
    z = stats.norm.ppf(1 - alpha / 2)
    sd1 = math.sqrt(psi - delta * delta)
    if sd1 == 0.0:
        return 1.0
    shift = abs(delta) * math.sqrt(n)
    return float(
        stats.norm.cdf((shift - z * math.sqrt(psi)) / sd1)
        + stats.norm.cdf((-shift - z * math.sqrt(psi)) / sd1)
    )


def connor_sample_size(delta: float, psi: float, power: float = 0.8, alpha: float = 0.05) -> float:
    """Pairs needed to detect `delta` with the given power (not rounded up)."""
    _check_psi(psi)
    _check_delta(delta, psi)
    za, zb = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(power)
    return float((za * math.sqrt(psi) + zb * math.sqrt(psi - delta * delta)) ** 2 / delta**2)


@dataclass(frozen=True)
class MdeResult(Result):
    mde: float
    n: int
    psi: float
    power: float
    alpha: float
    note: str = ""
    title: ClassVar[str] = "Minimum detectable difference (Connor 1987), two-sided"


def connor_mde(n: int, psi: float, power: float = 0.8, alpha: float = 0.05) -> MdeResult:
    """Smallest |delta| the McNemar test detects with `power` at n pairs and discordance psi.

    Solves Connor's sample-size equation for delta (one tail, as the equation is written).
    If even delta = psi (every discordant pair one way) needs more than n pairs, the MDE is
    reported as psi with a note.
    """
    _check_psi(psi)
    if n < 1:
        raise ValueError("n must be >= 1")
    za, zb = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(power)
    g = lambda d: (za * math.sqrt(psi) + zb * math.sqrt(max(0.0, psi - d * d))) / math.sqrt(n) - d
    if g(psi) > 0:
        return MdeResult(
            psi,
            n,
            psi,
            power,
            alpha,
            note="not resolvable: even a difference equal to the discordance rate is below "
            "the detectable size at this n",
        )
    d = optimize.brentq(g, 1e-15, psi, xtol=1e-15, rtol=1e-14)
    return MdeResult(float(d), n, psi, power, alpha)


def _reject_counts(m: int, alpha: float, mid_p: bool) -> np.ndarray:
    """For m discordant pairs, a boolean array over b = 0..m: does the (mid-p) exact test reject?"""
    b = np.arange(m + 1)
    lo = np.minimum(b, m - b)
    p = np.minimum(1.0, 2.0 * stats.binom.cdf(lo, m, 0.5))
    if mid_p:
        point = stats.binom.pmf(b, m, 0.5)
        p = np.where(b == m - b, 1.0 - 0.5 * point, p - point)
    return p <= alpha


def exact_power(
    delta: float, psi: float, n: int, alpha: float = 0.05, mid_p: bool = True, tail: float = 1e-12
) -> float:
    """Power of the exact (or mid-p) conditional McNemar test by enumeration over m and b."""
    _check_psi(psi)
    _check_delta(delta, psi)
    p10 = (psi + delta) / 2.0
    q = p10 / psi
    m_lo = int(stats.binom.ppf(tail, n, psi))
    m_hi = int(stats.binom.isf(tail, n, psi))
    total = 0.0
    for m in range(max(1, m_lo), min(n, m_hi) + 1):
        pm = stats.binom.pmf(m, n, psi)
        rej = _reject_counts(m, alpha, mid_p)
        total += pm * float(stats.binom.pmf(np.arange(m + 1), m, q)[rej].sum())
    return total


def _ni_sds(psi: float, margin: float, diff: float) -> tuple[float, float]:
    """(sd under H0: diff = -margin, sd under H1: diff) of one pair's score, Nam (1997) / Tango (1998).

    sigma0^2 = 2 p21~(-margin) - margin (1 + margin), with the restricted MLE evaluated at the
    true cell probabilities p10 = (psi + diff)/2, p01 = (psi - diff)/2; sigma1^2 = psi - diff^2.
    """
    from evalkit.stats.paired_ci import restricted_mle_p21

    _check_psi(psi)
    if not 0.0 < margin < 1.0:
        raise ValueError(f"margin must be in (0, 1), got {margin}")
    if abs(diff) > psi:
        raise ValueError(f"|diff| cannot exceed the discordance psi, got diff={diff}, psi={psi}")
    p10, p01 = (psi + diff) / 2.0, (psi - diff) / 2.0
    p21 = restricted_mle_p21(p10, p01, 1, -margin)
    var0 = 2.0 * p21 - margin * (1.0 + margin)
    return math.sqrt(max(var0, 0.0)), math.sqrt(max(psi - diff * diff, 0.0))


def normal_sample_size(
    effect: float, sd0: float, sd1: float, power: float = 0.8, alpha: float = 0.025
) -> float:
    """n for a one-sided z-test of a shift `effect` with per-observation sd0 under H0 and sd1 under H1:
    n = (z_{1-alpha} sd0 + z_{power} sd1)^2 / effect^2 (not rounded up)."""
    if effect <= 0:
        raise ValueError(f"the effect must be positive, got {effect}")
    za, zb = stats.norm.ppf(1 - alpha), stats.norm.ppf(power)
    return float((za * sd0 + zb * sd1) ** 2 / effect**2)


def noninferiority_sample_size(
    psi: float, margin: float, diff: float = 0.0, power: float = 0.8, alpha: float = 0.025
) -> float:
    """Pairs needed for the Tango/Nam score test to show non-inferiority at `margin` (one-sided
    `alpha`) with the given power, when the true difference is `diff` and the discordance psi."""
    if diff <= -margin:
        raise ValueError(f"a true difference {diff} at or below -margin cannot be shown non-inferior")
    sd0, sd1 = _ni_sds(psi, margin, diff)
    return normal_sample_size(diff + margin, sd0, sd1, power, alpha)


def noninferiority_power(psi: float, margin: float, n: int, diff: float = 0.0, alpha: float = 0.025) -> float:
    """Approximate power of the Tango/Nam non-inferiority score test at n pairs."""
    sd0, sd1 = _ni_sds(psi, margin, diff)
    za = stats.norm.ppf(1 - alpha)
    if sd1 == 0.0:
        return 1.0 if diff + margin > 0 else 0.0
    return float(stats.norm.cdf((math.sqrt(n) * (diff + margin) - za * sd0) / sd1))
