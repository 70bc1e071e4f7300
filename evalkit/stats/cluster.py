"""Clustered standard error of a mean score (Miller 2024, "Adding Error Bars to Evals", R2).

When questions come in groups (one base question padded to several lengths, several questions
per passage) the naive CLT error is too small. Miller's estimator adds the within-cluster
cross products: SE^2 = SE_CLT^2 + (1/n^2) sum_c sum_{i != j in c} (s_i - mean)(s_j - mean).
Pass per-question differences s_A - s_B to get the clustered SE of a paired difference.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from evalkit.stats._result import Result


@dataclass(frozen=True)
class ClusteredSE(Result):
    mean: float
    n: int
    n_clusters: int
    se_clt: float
    se_clustered: float
    title: ClassVar[str] = "Mean score with CLT and clustered standard errors (Miller 2024)"

    @property
    def inflation(self) -> float:
        """How many times larger the clustered SE is than the naive one."""
        return self.se_clustered / self.se_clt if self.se_clt > 0 else math.nan


def clustered_se(scores: Sequence[float], clusters: Sequence[Hashable]) -> ClusteredSE:
    """Mean of `scores` with the CLT SE sqrt(sum e^2 / (n(n-1))) and Miller's clustered SE."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or len(s) != len(clusters):
        raise ValueError("scores and clusters must be flat sequences of the same length")
    n = len(s)
    if n < 2:
        raise ValueError("a standard error needs at least two scores")
    e = s - s.mean()
    se_clt2 = float(e @ e) / (n * (n - 1))
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    sums = np.bincount(codes, weights=e)
    squares = np.bincount(codes, weights=e * e)
    cross = float(np.sum(sums * sums - squares))  # sum over clusters of sum_{i != j} e_i e_j
    se_cl2 = max(0.0, se_clt2 + cross / (n * n))
    return ClusteredSE(float(s.mean()), n, int(codes.max()) + 1, math.sqrt(se_clt2), math.sqrt(se_cl2))
