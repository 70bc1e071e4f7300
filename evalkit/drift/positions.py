"""Log-spaced positions: the buckets metrics are averaged in, and the state checkpoints.

A position is the number of tokens the model has read when it predicts the next one (1-based),
so the logits of the i-th input token (0-based) sit at position i + 1. Errors of a recurrent
state are expected to grow like a power of the position, which is a straight line on log axes:
log-spaced buckets give each octave the same weight in a fit and in a plot.
"""

from __future__ import annotations

import numpy as np


def bucket_edges(length: int, per_octave: int = 2) -> np.ndarray:
    """Integer edges e_0=1 < e_1 < ... < e_n = length + 1; bucket b holds positions [e_b, e_{b+1}).

    Edges are round(2 ** (j / per_octave)), deduplicated, so small positions get one bucket each
    and each later octave is split into `per_octave` buckets.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if per_octave < 1:
        raise ValueError(f"per_octave must be >= 1, got {per_octave}")
    n = int(np.ceil(np.log2(length + 1) * per_octave)) + 1
    raw = np.round(2.0 ** (np.arange(n) / per_octave)).astype(np.int64)
    edges = np.unique(np.concatenate([raw[raw <= length], [length + 1]]))
    return edges


def bucket_of(positions: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index of the bucket each position falls in."""
    return np.searchsorted(edges, positions, side="right") - 1


def checkpoints(length: int, per_octave: int = 1, boundaries: np.ndarray | None = None) -> list[int]:
    """Log-spaced positions at which states are compared, always ending at `length`.

    With `boundaries` (the positions where a state actually exists, e.g. the ends of prefill
    chunks), each target is moved to the nearest boundary at or before it, which keeps the
    spacing logarithmic as long as the chunks are small against the positions.
    """
    targets = [int(p) for p in bucket_edges(length, per_octave)[:-1]] + [length]
    if boundaries is None:
        return sorted(set(targets))
    b = np.asarray(sorted(set(int(x) for x in boundaries)), dtype=np.int64)
    if b.size == 0:
        return []
    picked = set()
    for t in targets:
        i = np.searchsorted(b, t, side="right") - 1
        if i >= 0:
            picked.add(int(b[i]))
    picked.add(int(b[-1]))
    return sorted(picked)


def format_position(p: float) -> str:
    """1024 -> '1k', 131072 -> '128k', 1536 -> '1.5k', 300 -> '300'."""
    p = float(p)
    if p >= 1024:
        v = p / 1024
        return f"{v:.0f}k" if abs(v - round(v)) < 0.05 else f"{v:.1f}k"
    return f"{p:.0f}"


def fmt(x: float | None, spec: str = ".3g", none: str = "–") -> str:
    """A figure of a drift table: `spec` formatted, `none` where there is none."""
    return none if x is None else format(x, spec)
