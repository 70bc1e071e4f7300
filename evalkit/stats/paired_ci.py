"""Confidence intervals for a paired difference of proportions, delta = p_A - p_B = (b - c)/n.

b = questions only arm A got right, c = only arm B, n = all paired questions. Tango's score
interval is the primary one (it needs only b, c, n, stays defined when b = c = 0, and inverts the
same statistic as the non-inferiority test); Newcombe's method 10 and Bonett-Price are the
closed-form alternatives Fagerland, Lydersen & Laake (2014) recommend. Neither scipy nor
statsmodels has a paired-difference interval, so all are written here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from scipy import optimize

from evalkit.stats._result import Result
from evalkit.stats.accuracy import wilson_ci, z_value

_EDGE = 1e-12  # distance from +-1 at which the score statistic is still finite


@dataclass(frozen=True)
class PairedCI(Result):
    method: str
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    note: str = ""
    title: ClassVar[str] = "CI for the paired difference p_A - p_B"


def _check(b: int, c: int, n: int) -> None:
    if n <= 0:
        raise ValueError("the paired difference needs at least one question (n >= 1)")
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need b, c >= 0 and b + c <= n, got b={b}, c={c}, n={n}")


def restricted_mle_p21(b: int, c: int, n: int, theta: float) -> float:
    """Maximum-likelihood P(only B right) under the constraint p_A - p_B = theta (Tango 1998)."""
    qa = 2.0 * n
    qb = -b - c + (2.0 * n - b + c) * theta
    qc = -c * theta * (1.0 - theta)
    disc = max(0.0, qb * qb - 4.0 * qa * qc)
    return (math.sqrt(disc) - qb) / (2.0 * qa)


def tango_score(b: int, c: int, n: int, theta: float) -> float:
    """Tango's score statistic S(theta) = (b - c - n theta) / sqrt(n (2 p21~ + theta (1 - theta))).

    Decreasing in theta; S(0) is the uncorrected McNemar z.
    """
    _check(b, c, n)
    p21 = restricted_mle_p21(b, c, n, theta)
    var = n * (2.0 * p21 + theta * (1.0 - theta))
    num = b - c - n * theta
    if var <= 0.0:
        return math.copysign(math.inf, num) if num != 0 else 0.0
    return num / math.sqrt(var)


def tango_ci(b: int, c: int, n: int, confidence: float = 0.95) -> PairedCI:
    """Tango's asymptotic score interval {theta : |S(theta)| <= z}, by root-finding on each side."""
    _check(b, c, n)
    z = z_value(confidence)
    est = (b - c) / n
    f = lambda t: tango_score(b, c, n, t)
    lo_end, hi_end = -1.0 + _EDGE, 1.0 - _EDGE
    # Lower limit: S(theta) = +z somewhere in (-1, est]; S(est) = 0 < z.
    if est <= lo_end or f(lo_end) <= z:
        low = -1.0
    else:
        low = optimize.brentq(lambda t: f(t) - z, lo_end, est, xtol=1e-14, rtol=1e-14)
    if est >= hi_end or f(hi_end) >= -z:
        high = 1.0
    else:
        high = optimize.brentq(lambda t: f(t) + z, est, hi_end, xtol=1e-14, rtol=1e-14)
    note = "no discordant questions: the interval comes from n alone" if b + c == 0 else ""
    return PairedCI("tango", est, float(low), float(high), confidence, note)


def _wilson_halfwidths(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    low, high = wilson_ci(k, n, confidence)
    p = k / n
    return p, p - low, high - p


def newcombe_phi(a: int, b: int, c: int, d: int) -> float:
    """Newcombe's correlation correction phi-hat from D = ad - bc (0 for any empty margin)."""
    n = a + b + c + d
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    big_d = a * d - b * c
    if big_d > n / 2:
        return (big_d - n / 2) / math.sqrt(margins)
    if big_d >= 0:
        return 0.0
    return big_d / math.sqrt(margins)


@dataclass(frozen=True)
class NewcombeCI(PairedCI):
    phi: float = 0.0


def newcombe_ci(a: int, b: int, c: int, d: int, confidence: float = 0.95) -> NewcombeCI:
    """Newcombe (1998) method 10: square-and-add Wilson intervals with a correlation correction.

    Needs the full 2x2 table: a = both right, b = A only, c = B only, d = both wrong.
    """
    n = a + b + c + d
    _check(b, c, n)
    if min(a, d) < 0:
        raise ValueError("cell counts must be non-negative")
    p_a, dl1, du1 = _wilson_halfwidths(a + b, n, confidence)
    p_b, dl2, du2 = _wilson_halfwidths(a + c, n, confidence)
    phi = newcombe_phi(a, b, c, d)
    est = p_a - p_b
    low = est - math.sqrt(max(0.0, dl1**2 - 2 * phi * dl1 * du2 + du2**2))
    high = est + math.sqrt(max(0.0, du1**2 - 2 * phi * du1 * dl2 + dl2**2))
    return NewcombeCI("newcombe-10", est, max(-1.0, low), min(1.0, high), confidence, phi=phi)


def _wald_like(b: float, c: float, n: float, z: float) -> tuple[float, float, float]:
    est = (b - c) / n
    half = z * math.sqrt(max(0.0, (b + c) - (b - c) ** 2 / n)) / n
    return est, max(-1.0, est - half), min(1.0, est + half)


def wald_ci(b: int, c: int, n: int, confidence: float = 0.95) -> PairedCI:
    """Plain Wald interval (collapses to [0, 0] at b = c = 0; shown for comparison only)."""
    _check(b, c, n)
    est, low, high = _wald_like(b, c, n, z_value(confidence))
    return PairedCI("wald", est, low, high, confidence)


def agresti_min_ci(b: int, c: int, n: int, confidence: float = 0.95) -> PairedCI:
    """Agresti-Min (2005) 'Wald+2': add 1/2 to every cell, then Wald; estimate stays (b - c)/n."""
    _check(b, c, n)
    _, low, high = _wald_like(b + 0.5, c + 0.5, n + 2.0, z_value(confidence))
    return PairedCI("agresti-min", (b - c) / n, low, high, confidence)


def bonett_price_ci(b: int, c: int, n: int, confidence: float = 0.95) -> PairedCI:
    """Bonett-Price (2012) Laplace-adjusted Wald: p12 = (b+1)/(n+2), p21 = (c+1)/(n+2)."""
    _check(b, c, n)
    z = z_value(confidence)
    p12, p21 = (b + 1) / (n + 2), (c + 1) / (n + 2)
    centre = p12 - p21
    half = z * math.sqrt(max(0.0, p12 + p21 - centre**2) / (n + 2))
    low, high = max(-1.0, centre - half), min(1.0, centre + half)
    return PairedCI("bonett-price", (b - c) / n, low, high, confidence)
