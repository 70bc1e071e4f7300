"""Group-sequential designs for a paired comparison: alpha spending, boundaries, decisions at looks.

Lan-DeMets spending (one-sided alpha): O'Brien-Fleming type alpha(t) = 2 - 2 Phi(z_{1-alpha/2}/sqrt(t)),
Pocock type alpha ln(1 + (e - 1) t). Two boundary families share them:

- `sign_walk_design`: the exact discrete boundaries of McNemar's sign walk. Information is the
  discordant count m (under H0 each discordant pair favours either arm with probability 1/2,
  independently), so looks sit at pre-set discordant counts m_1 < ... < m_K. At look k the
  smallest count r_k favouring H1 is chosen whose cumulative exact crossing probability stays
  within alpha(m_k / m_K); discreteness leaves some alpha unspent, so the total is exact and <= alpha.
- `normal_design`: z boundaries for an asymptotically normal statistic (the Tango/Nam
  non-inferiority score) at information fractions t_k, by the Armitage-McPherson-Rowe
  recursion on a grid. Futility is non-binding: efficacy bounds ignore it, so obeying or
  ignoring a futility stop leaves the type I error <= alpha.

Repeated confidence intervals (Jennison & Turnbull 2000, ch. 9) use the same z boundaries and
keep simultaneous coverage whatever caused the stop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import optimize, stats

from evalkit.stats._result import Result

SPENDING = ("obf", "pocock")


def spent_alpha(t: float, alpha: float, spending: str = "obf") -> float:
    """Cumulative one-sided alpha spent by information fraction t (0 < t <= 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"the information fraction must be in [0, 1], got {t}")
    if t == 0.0:
        return 0.0
    if spending == "obf":
        return float(2.0 - 2.0 * stats.norm.cdf(stats.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))
    if spending == "pocock":
        return float(alpha * math.log(1.0 + (math.e - 1.0) * t))
    raise ValueError(f"unknown spending function {spending!r}; choose from {', '.join(SPENDING)}")


def _check_looks(looks: Sequence[float], what: str) -> None:
    if not looks:
        raise ValueError(f"a design needs at least one look ({what})")
    if any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] <= 0:
        raise ValueError(f"{what} must be positive and strictly increasing, got {list(looks)}")


@dataclass(frozen=True)
class SignWalkDesign(Result):
    """Exact boundaries of the one-sided sign test at pre-set discordant counts."""

    looks: tuple[int, ...]  # discordant counts m_k
    critical: tuple[int, ...]  # reject at look k when the count favouring H1 is >= critical[k]
    alpha: float
    spending: str
    spent: tuple[float, ...]  # exact cumulative type I error up to each look
    title: ClassVar[str] = "Group-sequential sign test (exact discrete boundaries)"

    @property
    def total_alpha(self) -> float:
        return self.spent[-1]

    def look_index(self, m: int) -> int | None:
        """The look at discordant count m, or None when m is not a planned look."""
        return self.looks.index(m) if m in self.looks else None

    def rejects(self, k: int, favouring_h1: int) -> bool:
        return favouring_h1 >= self.critical[k]


def _walk_step(dist: np.ndarray, steps: int, p: float) -> np.ndarray:
    """Distribution of the H1-favouring count after `steps` more discordant pairs (convolution)."""
    return np.convolve(dist, stats.binom.pmf(np.arange(steps + 1), steps, p))


def _walk_bounds(
    looks: Sequence[int], fractions: Sequence[float], alpha: float, spending: str
) -> tuple[list[int], list[float]]:
    """Critical counts and exact cumulative crossing probabilities of the fair sign walk observed at
    discordant counts `looks` (non-decreasing), spending alpha(fractions[k]) by look k."""
    dist = np.array([1.0])  # sub-distribution of the count on paths not yet stopped
    prev, crossed = 0, 0.0
    critical, spent = [], []
    for m, t in zip(looks, fractions):
        dist = _walk_step(dist, m - prev, 0.5)
        budget = spent_alpha(t, alpha, spending) - crossed
        tail = np.cumsum(dist[::-1])[::-1]  # tail[r] = P(count >= r, not stopped)
        ok = np.nonzero(tail <= budget * (1 + 1e-12))[0]
        r = int(ok[0]) if ok.size else m + 1
        r = max(r, m // 2 + 1)  # never reject on a count that does not favour H1
        gained = float(tail[r]) if r <= m else 0.0
        crossed += gained
        if r <= m:
            dist = dist.copy()
            dist[r:] = 0.0
        critical.append(r)
        spent.append(crossed)
        prev = m
    return critical, spent


def sign_walk_design(looks: Sequence[int], alpha: float = 0.025, spending: str = "obf") -> SignWalkDesign:
    """Exact one-sided boundaries at discordant counts `looks` (e.g. 40, 80, 120), one-sided alpha."""
    _check_looks(looks, "the discordant counts of the looks")
    if any(int(m) != m for m in looks):
        raise ValueError(f"looks must be whole discordant counts, got {list(looks)}")
    looks = tuple(int(m) for m in looks)
    critical, spent = _walk_bounds(looks, [m / looks[-1] for m in looks], alpha, spending)
    return SignWalkDesign(looks, tuple(critical), alpha, spending, tuple(spent))


def conditional_sign_walk(
    discordant: Sequence[int], fractions: Sequence[float], alpha: float = 0.025, spending: str = "obf"
) -> SignWalkDesign:
    """Exact boundaries for looks at pre-set question counts, conditional on the discordant counts
    seen so far (m_1 <= ... <= m_k, any may repeat or be 0).

    Under H0 each discordant pair favours either arm with probability 1/2 whatever the discordant
    counts, so, given them, the walk is the fair sign walk: spending alpha(t_k) at the looks'
    information fractions t_k (pre-set, not data-driven) keeps the exact type I error <= alpha
    conditionally on every sequence of counts, hence unconditionally. The bounds of earlier looks
    do not depend on later counts, so each look's bound can be computed when it is reached.
    """
    if len(discordant) != len(fractions) or not discordant:
        raise ValueError("give one discordant count per look, at least one")
    if any(int(m) != m or m < 0 for m in discordant) or any(
        b < a for a, b in zip(discordant, discordant[1:])
    ):
        raise ValueError(f"discordant counts must be whole, >= 0 and non-decreasing, got {list(discordant)}")
    if any(not 0.0 < t <= 1.0 for t in fractions) or any(b <= a for a, b in zip(fractions, fractions[1:])):
        raise ValueError(f"information fractions must increase within (0, 1], got {list(fractions)}")
    looks = tuple(int(m) for m in discordant)
    critical, spent = _walk_bounds(looks, fractions, alpha, spending)
    return SignWalkDesign(looks, tuple(critical), alpha, spending, tuple(spent))


def sign_walk_power(design: SignWalkDesign, p_h1: float) -> float:
    """Exact probability of crossing a boundary when each discordant pair favours H1 w.p. p_h1."""
    dist, prev, total = np.array([1.0]), 0, 0.0
    for m, r in zip(design.looks, design.critical):
        dist = _walk_step(dist, m - prev, p_h1)
        if r <= m:
            total += float(dist[r:].sum())
            dist = dist.copy()
            dist[r:] = 0.0
        prev = m
    return total


@dataclass(frozen=True)
class NormalDesign(Result):
    """One-sided z boundaries at information fractions for an asymptotically normal statistic."""

    fractions: tuple[float, ...]
    bounds: tuple[float, ...]  # reject at look k when Z_k >= bounds[k]
    alpha: float
    spending: str
    spent: tuple[float, ...]
    title: ClassVar[str] = "Group-sequential z boundaries (Lan-DeMets alpha spending)"


_GRID_SD = 8.0  # the grid spans +-8 sd of the score process
_GRID_POINTS = 601  # bounds within 1e-5 of a 4001-point grid


def _grid(center: float, info: float, upper: float) -> np.ndarray:
    """Grid points for the score at information `info` (mean `center`), cut at the bound."""
    lo = center - _GRID_SD * math.sqrt(info)
    hi = min(upper, center + _GRID_SD * math.sqrt(info))
    return np.linspace(lo, max(hi, lo + 1e-9), _GRID_POINTS)


def _trapezoid_weights(x: np.ndarray) -> np.ndarray:
    w = np.full(x.size, x[1] - x[0])
    w[0] = w[-1] = (x[1] - x[0]) / 2.0
    return w


def _cross_probability(
    c: float, t: float, dt: float, drift: float, grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None
) -> float:
    """P(not stopped before, S_t >= c sqrt(t)); grid = (points, weights, sub-density) at the last look."""
    edge, sd = c * math.sqrt(t), math.sqrt(dt)
    if grid is None:
        return float(stats.norm.sf((edge - drift * t) / sd))
    x, w, f = grid
    return float(np.sum(w * f * stats.norm.sf((edge - x - drift * dt) / sd)))


def _crossing(
    fractions: Sequence[float], bounds: Sequence[float] | None, alpha: float, spending: str, drift: float
) -> tuple[list[float], list[float]]:
    """Recursion over looks on the score scale S_k = Z_k sqrt(t_k) (Brownian motion with drift).

    With `bounds` None the bounds are solved from the spending function under drift 0; else the
    given bounds are used and the crossing probabilities under `drift` (mean of S at t = 1) returned.
    """
    solved, cumulative = [], []
    total, prev_t = 0.0, 0.0
    grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for k, t in enumerate(fractions):
        dt = t - prev_t
        sd = math.sqrt(dt)
        if bounds is None:
            target = spent_alpha(t, alpha, spending) - total
            c = (
                optimize.brentq(
                    lambda z, t=t, dt=dt, g=grid, a=target: _cross_probability(z, t, dt, drift, g) - a,
                    -10.0,
                    40.0,
                    xtol=1e-10,
                )
                if target > 0
                else math.inf
            )
        else:
            c = bounds[k]
        total += _cross_probability(c, t, dt, drift, grid) if math.isfinite(c) else 0.0
        solved.append(c)
        cumulative.append(total)
        new_x = _grid(drift * t, t, c * math.sqrt(t) if math.isfinite(c) else math.inf)
        if grid is None:
            new_f = stats.norm.pdf((new_x - drift * t) / sd) / sd
        else:
            x, w, f = grid
            kern = stats.norm.pdf((new_x[:, None] - x[None, :] - drift * dt) / sd) / sd
            new_f = kern @ (w * f)
        grid = (new_x, _trapezoid_weights(new_x), new_f)
        prev_t = t
    return solved, cumulative


def normal_design(fractions: Sequence[float], alpha: float = 0.025, spending: str = "obf") -> NormalDesign:
    """Lan-DeMets boundaries at information fractions (the last must be 1)."""
    _check_looks(fractions, "the information fractions")
    if abs(fractions[-1] - 1.0) > 1e-12:
        raise ValueError(f"the last look must be at information fraction 1, got {fractions[-1]}")
    bounds, spent = _crossing(fractions, None, alpha, spending, 0.0)
    return NormalDesign(tuple(float(f) for f in fractions), tuple(bounds), alpha, spending, tuple(spent))


def normal_design_power(design: NormalDesign, drift: float) -> float:
    """P(crossing some efficacy bound) when E[Z at t = 1] = drift (E[Z_k] = drift sqrt(t_k))."""
    return _crossing(design.fractions, design.bounds, design.alpha, design.spending, drift)[1][-1]


@dataclass(frozen=True)
class LookDecision(Result):
    """What a non-inferiority cell concludes at one look."""

    look: int  # 0-based
    n: int
    estimate: float
    statistic: float  # Tango/Nam score at -margin
    bound: float
    rci_low: float  # repeated CI for p_A - p_B at this look
    rci_high: float
    decision: str  # "noninferior", "futile", "continue", or "inconclusive" at the last look
    title: ClassVar[str] = "Sequential non-inferiority look"


NONINFERIOR, FUTILE, CONTINUE, INCONCLUSIVE = "noninferior", "futile", "continue", "inconclusive"


def _tango_limit(b: int, c: int, n: int, z: float, side: int) -> float:
    """The theta where the Tango score equals side * z (the lower limit for side = +1)."""
    from evalkit.stats.paired_ci import tango_score

    est = (b - c) / n
    edge = -1.0 + 1e-12 if side > 0 else 1.0 - 1e-12
    f = lambda th: tango_score(b, c, n, th) - side * z
    if (side > 0 and (est <= edge or f(edge) <= 0)) or (side < 0 and (est >= edge or f(edge) >= 0)):
        return -1.0 if side > 0 else 1.0
    lo, hi = (edge, est) if side > 0 else (est, edge)
    return float(optimize.brentq(f, lo, hi, xtol=1e-12))


def noninferiority_look(design: NormalDesign, k: int, b: int, c: int, n: int, margin: float) -> LookDecision:
    """Decide a non-inferiority cell at look k (b = A-only right, c = B-only right, n pairs).

    Success when the Tango score at -margin reaches the look's efficacy bound; non-binding
    futility when the repeated CI's upper end is below -margin (no later look can then succeed
    with any confidence). The repeated CI uses the same bound on both sides.
    """
    from evalkit.stats.paired_ci import tango_score

    if not 0 <= k < len(design.bounds):
        raise ValueError(f"look {k} is not in the design ({len(design.bounds)} looks)")
    z = tango_score(b, c, n, -margin)
    bound = design.bounds[k]
    low, high = _tango_limit(b, c, n, bound, +1), _tango_limit(b, c, n, bound, -1)
    if z >= bound:
        decision = NONINFERIOR
    elif high < -margin:
        decision = FUTILE
    else:
        decision = INCONCLUSIVE if k == len(design.bounds) - 1 else CONTINUE
    return LookDecision(k, n, (b - c) / n, float(z), float(bound), low, high, decision)


def information_inflation(design: NormalDesign, power: float = 0.8) -> float:
    """Max information of the design over a fixed-sample test's, at equal one-sided alpha and power
    (gsDesign: 1.013 for three LD-OBF looks, 1.171 for Pocock, at 80%)."""
    fixed = stats.norm.ppf(1.0 - design.alpha) + stats.norm.ppf(power)
    # a group-sequential design never needs less information than the fixed-sample test, and the
    # usual spending functions need well under 1.5^2 = 2.25 times as much
    drift = optimize.brentq(
        lambda d: normal_design_power(design, d) - power, fixed * 0.999, fixed * 1.5, xtol=1e-5
    )
    return float((drift / fixed) ** 2)
