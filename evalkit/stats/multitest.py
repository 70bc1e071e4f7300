"""Multiplicity adjustment: Holm and fixed sequence (family-wise), Benjamini-Hochberg (FDR)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from evalkit.stats._result import Result


@dataclass(frozen=True)
class MultitestResult(Result):
    method: str
    pvalues: tuple[float, ...]
    adjusted: tuple[float, ...]
    reject: tuple[bool, ...]
    alpha: float
    title: ClassVar[str] = "Multiple-comparison adjustment"


def _as_array(pvalues: Sequence[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError("p-values must be a flat sequence")
    if np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError("p-values must lie in [0, 1]")
    return p


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> MultitestResult:
    """Holm (1979) step-down: adj p_(i) = max_{j<=i} min(1, (m - j + 1) p_(j))."""
    p = _as_array(pvalues)
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj_sorted = np.maximum.accumulate(stepped) if m else stepped
    adj = np.empty(m)
    adj[order] = adj_sorted
    return MultitestResult(
        "holm", tuple(p.tolist()), tuple(adj.tolist()), tuple(bool(x) for x in adj <= alpha), alpha
    )


def benjamini_hochberg(pvalues: Sequence[float], alpha: float = 0.05) -> MultitestResult:
    """Benjamini-Hochberg (1995) step-up: adj p_(i) = min_{j>=i} min(1, m p_(j) / j)."""
    p = _as_array(pvalues)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    adj_sorted = np.minimum.accumulate(scaled[::-1])[::-1] if m else scaled
    adj = np.empty(m)
    adj[order] = adj_sorted
    return MultitestResult(
        "fdr_bh", tuple(p.tolist()), tuple(adj.tolist()), tuple(bool(x) for x in adj <= alpha), alpha
    )


def fixed_sequence(pvalues: Sequence[float], alpha: float = 0.025) -> MultitestResult:
    """Fixed-sequence (hierarchical) testing in the given order (Maurer et al. 1995): each hypothesis
    at full alpha, going on only after a rejection; FWER <= alpha. Adjusted p_(i) = max_{j<=i} p_j."""
    p = _as_array(pvalues)
    adj = np.maximum.accumulate(p) if len(p) else p
    return MultitestResult(
        "fixed_sequence", tuple(p.tolist()), tuple(adj.tolist()), tuple(bool(x) for x in adj <= alpha), alpha
    )
