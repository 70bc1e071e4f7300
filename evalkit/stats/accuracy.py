"""One arm's accuracy: lm-eval's standard error and the Wilson score interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from evalkit.stats._result import Result
from evalkit.stats.stderr import lmeval_stderr

__all__ = ["ProportionResult", "lmeval_stderr", "proportion", "wilson_ci", "z_value"]


def z_value(confidence: float) -> float:
    """Two-sided critical value, e.g. 1.959964 for 0.95."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(stats.norm.ppf(0.5 + confidence / 2.0))


@dataclass(frozen=True)
class ProportionResult(Result):
    successes: int
    n: int
    estimate: float
    stderr: float  # lm-eval's sqrt(p(1-p)/(n-1)); nan for n <= 1
    ci_low: float
    ci_high: float
    confidence: float
    title: ClassVar[str] = "Accuracy with lm-eval stderr and Wilson CI"


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (statsmodels' `proportion_confint`, which
    divides by n, hence the n = 0 case here: (0, 1))."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return 0.0, 1.0
    z_value(confidence)  # the same check of `confidence` as every interval here
    low, high = proportion_confint(successes, n, alpha=1.0 - confidence, method="wilson")
    return max(0.0, float(low)), min(1.0, float(high))


def proportion(successes: int, n: int, confidence: float = 0.95) -> ProportionResult:
    """Accuracy of one arm: estimate, lm-eval stderr and Wilson CI together."""
    low, high = wilson_ci(successes, n, confidence)
    est = successes / n if n else math.nan
    return ProportionResult(successes, n, est, lmeval_stderr(successes, n), low, high, confidence)
