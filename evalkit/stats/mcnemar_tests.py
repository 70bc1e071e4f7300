"""McNemar tests on the discordant pairs of a paired binary comparison.

Only the discordant counts matter: b = questions only arm A got right, c = only arm B.
Under H0 (equal accuracy) b | m=b+c ~ Binomial(m, 1/2). The mid-p is the primary test
(Fagerland et al. 2013); the exact conditional p is reported as the conservative one.
scipy's `binomtest` raises for m = 0 and statsmodels has no mid-p, so both are written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scipy import stats

from evalkit.stats._result import Result

NO_DISCORDANT = "no discordant questions: the arms agree on every question, p = 1"


def _check_counts(b: int, c: int) -> None:
    if b < 0 or c < 0 or int(b) != b or int(c) != c:
        raise ValueError(f"discordant counts must be non-negative integers, got b={b}, c={c}")


@dataclass(frozen=True)
class McNemarResult(Result):
    b: int
    c: int
    pvalue: float
    method: str  # "exact", "mid-p", "asymptotic", "asymptotic-cc"
    statistic: float | None = None  # chi-square (asymptotic variants) or None
    note: str = ""
    title: ClassVar[str] = "McNemar test (two-sided)"


def _exact_two_sided(b: int, c: int) -> float:
    m = b + c
    return min(1.0, 2.0 * float(stats.binom.cdf(min(b, c), m, 0.5)))


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact conditional McNemar: p = min(1, 2 P[X <= min(b, c)]), X ~ Bin(b+c, 1/2); p = 1 if b = c = 0."""
    _check_counts(b, c)
    if b + c == 0:
        return McNemarResult(b, c, 1.0, "exact", note=NO_DISCORDANT)
    return McNemarResult(b, c, _exact_two_sided(b, c), "exact")


def mcnemar_midp(b: int, c: int) -> McNemarResult:
    """Mid-p McNemar: exact p minus P[X = b] (b != c), or 1 - P[X = b]/2 (b = c); p = 1 if b = c = 0."""
    _check_counts(b, c)
    m = b + c
    if m == 0:
        return McNemarResult(b, c, 1.0, "mid-p", note=NO_DISCORDANT)
    point = float(stats.binom.pmf(b, m, 0.5))
    p = 1.0 - 0.5 * point if b == c else _exact_two_sided(b, c) - point
    return McNemarResult(b, c, min(1.0, max(0.0, p)), "mid-p")


def mcnemar_asymptotic(b: int, c: int, correction: bool = False) -> McNemarResult:
    """Asymptotic McNemar chi-square, (b-c)^2/(b+c), optionally Edwards-corrected with |b-c|-1 clamped at 0.

    Without correction this is the Tango score test at a difference of 0.
    """
    _check_counts(b, c)
    method = "asymptotic-cc" if correction else "asymptotic"
    m = b + c
    if m == 0:
        return McNemarResult(b, c, 1.0, method, statistic=0.0, note=NO_DISCORDANT)
    num = max(0.0, abs(b - c) - 1.0) if correction else float(abs(b - c))
    chi2 = num * num / m
    return McNemarResult(b, c, float(stats.chi2.sf(chi2, 1)), method, statistic=chi2)


@dataclass(frozen=True)
class McNemarAll(Result):
    """The three McNemar variants evalkit reports side by side."""

    b: int
    c: int
    midp: float
    exact: float
    asymptotic: float
    note: str = ""
    title: ClassVar[str] = "McNemar tests (two-sided): mid-p (primary), exact (conservative), asymptotic"


def mcnemar(b: int, c: int) -> McNemarAll:
    """All McNemar variants at once (mid-p is the one to act on)."""
    mid = mcnemar_midp(b, c)
    return McNemarAll(
        b, c, mid.pvalue, mcnemar_exact(b, c).pvalue, mcnemar_asymptotic(b, c).pvalue, note=mid.note
    )
