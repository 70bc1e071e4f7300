"""Non-inferiority and equivalence of arm A against arm B on paired binary data.

Tango (1998) / Nam (1997) score test of H0: p_A - p_B <= -margin, i.e. the same score
statistic S(theta) whose inversion gives the Tango CI, evaluated at theta = -margin. So the
test rejects at one-sided alpha exactly when the (1 - 2 alpha) Tango CI's lower end is above
-margin. TOST runs the test on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scipy import stats

from evalkit.stats._result import Result
from evalkit.stats.paired_ci import tango_score


@dataclass(frozen=True)
class NonInferiorityResult(Result):
    margin: float
    statistic: float  # z = S(-margin)
    pvalue: float  # one-sided, 1 - Phi(z)
    alpha: float
    noninferior: bool
    estimate: float
    title: ClassVar[str] = "Tango/Nam score test of non-inferiority, H0: p_A - p_B <= -margin"

    @property
    def verdict(self) -> str:
        pp = 100 * self.margin
        if self.noninferior:
            return (
                f"non-inferior: A is not worse than B by {pp:.2g} pp or more "
                f"(one-sided p = {self.pvalue:.3g} < {self.alpha:g})"
            )
        return f"non-inferiority at {pp:.2g} pp not shown (one-sided p = {self.pvalue:.3g} >= {self.alpha:g})"


def noninferiority_test(
    b: int, c: int, n: int, margin: float = 0.01, alpha: float = 0.025
) -> NonInferiorityResult:
    """Score test of H0: p_A - p_B <= -margin (b = A-only right, c = B-only right, n pairs)."""
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    z = tango_score(b, c, n, -margin)
    p = float(stats.norm.sf(z))
    return NonInferiorityResult(margin, z, p, alpha, p < alpha, (b - c) / n)


@dataclass(frozen=True)
class TostResult(Result):
    margin: float
    pvalue: float  # max of the two one-sided p-values
    pvalue_lower: float  # H0: delta <= -margin
    pvalue_upper: float  # H0: delta >= +margin
    alpha: float
    equivalent: bool
    estimate: float
    title: ClassVar[str] = "TOST equivalence with Tango score tests, H0: |p_A - p_B| >= margin"


def tost(b: int, c: int, n: int, margin: float = 0.01, alpha: float = 0.05) -> TostResult:
    """Two one-sided score tests; equivalence when both reject at alpha."""
    if not 0.0 < margin < 1.0:
        raise ValueError(f"margin must be in (0, 1), got {margin}")
    p_low = float(stats.norm.sf(tango_score(b, c, n, -margin)))
    p_up = float(stats.norm.cdf(tango_score(b, c, n, margin)))
    p = max(p_low, p_up)
    return TostResult(margin, p, p_low, p_up, alpha, p < alpha, (b - c) / n)
