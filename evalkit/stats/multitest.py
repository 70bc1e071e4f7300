"""Multiplicity adjustment: Holm and fixed sequence (family-wise), Benjamini-Hochberg (FDR).

Benjamini-Hochberg is statsmodels' `multipletests`; Holm is computed here with statsmodels' exact
arithmetic (its `multipletests(method="holm")` runs a full `gc.collect()` on every call: 0.1 s in a
process holding torch, paid by every paired report; tests hold the two equal), and fixed sequence,
which statsmodels does not offer, too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from statsmodels.stats.multitest import multipletests

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


def _statsmodels(method: str, pvalues: Sequence[float], alpha: float) -> MultitestResult:
    """statsmodels' adjusted p-values; rejection is adj <= alpha, as the other procedures here."""
    p = _as_array(pvalues)
    adj = multipletests(p, alpha=alpha, method=method)[1] if len(p) else p
    return MultitestResult(
        method, tuple(p.tolist()), tuple(float(x) for x in adj), tuple(bool(x) for x in adj <= alpha), alpha
    )


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> MultitestResult:
    """Holm (1979) step-down: adj p_(i) = max_{j<=i} min(1, (m - j + 1) p_(j))."""
    p = _as_array(pvalues)
    order = np.argsort(p)
    adj = np.empty_like(p)
    adj[order] = np.minimum(np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)), 1.0)
    return MultitestResult(
        "holm", tuple(p.tolist()), tuple(float(x) for x in adj), tuple(bool(x) for x in adj <= alpha), alpha
    )


def benjamini_hochberg(pvalues: Sequence[float], alpha: float = 0.05) -> MultitestResult:
    """Benjamini-Hochberg (1995) step-up: adj p_(i) = min_{j>=i} min(1, m p_(j) / j)."""
    return _statsmodels("fdr_bh", pvalues, alpha)


def fixed_sequence(pvalues: Sequence[float], alpha: float = 0.025) -> MultitestResult:
    """Fixed-sequence (hierarchical) testing in the given order (Maurer et al. 1995): each hypothesis
    at full alpha, going on only after a rejection; FWER <= alpha. Adjusted p_(i) = max_{j<=i} p_j."""
    p = _as_array(pvalues)
    adj = np.maximum.accumulate(p) if len(p) else p
    return MultitestResult(
        "fixed_sequence", tuple(p.tolist()), tuple(adj.tolist()), tuple(bool(x) for x in adj <= alpha), alpha
    )
