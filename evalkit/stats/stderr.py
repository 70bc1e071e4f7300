"""lm-eval's standard error of a mean of 0/1 scores (kept free of scipy so the store imports fast)."""

from __future__ import annotations

import math


def lmeval_stderr(successes: int, n: int) -> float:
    """lm-eval's `mean_stderr` for 0/1 scores: sample SD / sqrt(n) = sqrt(p(1-p)/(n-1)); nan if n <= 1."""
    if n <= 1:
        return math.nan
    p = successes / n
    return math.sqrt(p * (1.0 - p) / (n - 1))
