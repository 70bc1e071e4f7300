"""Does arm B disagree with the baseline more often than a replicate of the baseline does?

On the same questions, X_i = 1 when the baseline and its replicate (A/A) disagree and Y_i = 1
when the baseline and the candidate (A/B) disagree. The two rates are paired, so the test is
McNemar's on (X, Y): only questions with X != Y inform it. With u = #(Y=1, X=0) and
v = #(X=1, Y=0), under H0 (equal disagreement rates) u | u + v ~ Bin(u + v, 1/2); the one-sided
exact conditional p-value is P(Bin >= u), and the mid-p subtracts half of P(Bin = u).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scipy import stats

from evalkit.stats._result import Result


@dataclass(frozen=True)
class DiscordanceExcessResult(Result):
    n: int
    aa_discordant: int
    ab_discordant: int
    only_ab: int  # u: candidate disagrees, replicate agrees
    only_aa: int  # v: replicate disagrees, candidate agrees
    pvalue: float  # one-sided exact conditional
    midp: float
    alpha: float
    exceeds: bool
    title: ClassVar[str] = "Excess disagreement over the A/A floor: one-sided exact conditional McNemar"


def discordance_excess(aa: list[bool], ab: list[bool], alpha: float = 0.05) -> DiscordanceExcessResult:
    """aa[i]: baseline != replicate on question i; ab[i]: baseline != candidate on question i."""
    if len(aa) != len(ab) or not aa:
        raise ValueError("need the same, non-zero number of questions on both sides")
    u = sum(y and not x for x, y in zip(aa, ab))
    v = sum(x and not y for x, y in zip(aa, ab))
    m = u + v
    if m == 0:
        p = midp = 1.0
    else:
        p = float(stats.binom.sf(u - 1, m, 0.5))
        midp = float(p - 0.5 * stats.binom.pmf(u, m, 0.5))
    return DiscordanceExcessResult(len(aa), sum(aa), sum(ab), u, v, p, midp, alpha, p < alpha)
