"""Running per-bucket statistics of a per-position metric, so no position's value is kept.

For each log-spaced bucket: count, sum, sum of squares, sum of log(position) (the bucket's centre
on log axes), max and the number of exact zeros. The finite values themselves are kept too (one
float64 per position: 1 MB per metric and arm at 128k tokens, nothing like the [L, vocab] logits),
so quantiles (p50, p99, p99.9) are exact order statistics, never histogram bin edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalkit.drift.positions import bucket_edges, bucket_of


@dataclass
class BucketStats:
    """Statistics of one non-negative metric in the buckets given by `edges`."""

    edges: np.ndarray
    count: np.ndarray = field(init=False)
    total: np.ndarray = field(init=False)
    total_sq: np.ndarray = field(init=False)
    total_logpos: np.ndarray = field(init=False)
    maximum: np.ndarray = field(init=False)
    zeros: np.ndarray = field(init=False)
    nonfinite: np.ndarray = field(init=False)
    _values: list[np.ndarray] = field(init=False, repr=False)  # finite values, in `add` order
    _buckets: list[np.ndarray] = field(init=False, repr=False)  # their bucket indices

    def __post_init__(self) -> None:
        nb = len(self.edges) - 1
        self.count = np.zeros(nb, np.int64)
        self.total = np.zeros(nb)
        self.total_sq = np.zeros(nb)
        self.total_logpos = np.zeros(nb)
        self.maximum = np.full(nb, -np.inf)
        self.zeros = np.zeros(nb, np.int64)
        self.nonfinite = np.zeros(nb, np.int64)
        self._values, self._buckets = [], []

    @classmethod
    def for_length(cls, length: int, per_octave: int = 2) -> BucketStats:
        return cls(bucket_edges(length, per_octave))

    def add(self, positions: np.ndarray, values: np.ndarray) -> None:
        """Fold in values (>= 0; NaN/inf are counted apart and left out of the moments)."""
        positions = np.asarray(positions, dtype=np.int64).ravel()
        values = np.asarray(values, dtype=np.float64).ravel()
        if positions.shape != values.shape:
            raise ValueError(f"{positions.shape} positions but {values.shape} values")
        if positions.size == 0:
            return
        nb = len(self.count)
        b = bucket_of(positions, self.edges)
        if b.min() < 0 or b.max() >= nb:
            raise ValueError(f"positions outside 1..{self.edges[-1] - 1}")
        finite = np.isfinite(values)
        self.nonfinite += np.bincount(b[~finite], minlength=nb)
        b, v, p = b[finite], values[finite], positions[finite]
        self.count += np.bincount(b, minlength=nb)
        self.total += np.bincount(b, weights=v, minlength=nb)
        self.total_sq += np.bincount(b, weights=v * v, minlength=nb)
        self.total_logpos += np.bincount(b, weights=np.log(p), minlength=nb)
        np.maximum.at(self.maximum, b, v)
        zero = v <= 0
        self.zeros += np.bincount(b[zero], minlength=nb)
        self._values.append(v)
        self._buckets.append(b)

    # ---- read-outs -------------------------------------------------------------------------------
    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.total / np.maximum(self.count, 1), np.nan)

    def std(self) -> np.ndarray:
        """Sample standard deviation within each bucket (ddof=1; NaN below 2 values)."""
        n = self.count.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (self.total_sq - self.total**2 / np.maximum(n, 1)) / (n - 1)
        var = np.where(n > 1, np.maximum(var, 0.0), np.nan)
        return np.sqrt(var)

    def position(self) -> np.ndarray:
        """Geometric mean position of the values in each bucket (NaN for empty buckets)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, np.exp(self.total_logpos / np.maximum(self.count, 1)), np.nan)

    def values(self, buckets: np.ndarray | None = None) -> np.ndarray:
        """The finite values of the given buckets (all buckets if None), in no particular order."""
        if not self._values:
            return np.zeros(0)
        v, b = np.concatenate(self._values), np.concatenate(self._buckets)
        return v if buckets is None else v[np.isin(b, np.asarray(buckets))]

    def quantile(self, q: float, buckets: np.ndarray | None = None) -> np.ndarray | float:
        """Exact q-quantile per bucket (or pooled over `buckets` if given, as a float): numpy's
        'linear' order-statistic interpolation over the finite values, NaN where there are none."""
        if buckets is not None:
            v = self.values(buckets)
            return float(np.quantile(v, q)) if v.size else float("nan")
        out = np.full(len(self.count), np.nan)
        if not self._values:
            return out
        v, b = np.concatenate(self._values), np.concatenate(self._buckets)
        order = np.lexsort((v, b))
        v, b = v[order], b[order]
        starts = np.searchsorted(b, np.arange(len(self.count)), side="left")
        ends = np.searchsorted(b, np.arange(len(self.count)), side="right")
        for k, (s, e) in enumerate(zip(starts, ends)):
            if e > s:
                out[k] = float(np.quantile(v[s:e], q))
        return out

    def overall(self) -> dict[str, float]:
        """Pooled statistics over every position."""
        n = int(self.count.sum())
        allb = np.arange(len(self.count))
        out = {
            "n": n,
            "mean": float(self.total.sum() / n) if n else float("nan"),
            "max": float(self.maximum.max()) if n else float("nan"),
            "p50": self.quantile(0.5, allb) if n else float("nan"),
            "p99": self.quantile(0.99, allb) if n else float("nan"),
            "p999": self.quantile(0.999, allb) if n else float("nan"),
            "zeros": int(self.zeros.sum()),
            "nonfinite": int(self.nonfinite.sum()),
        }
        return out

    def rows(self) -> list[dict[str, float]]:
        """One dict per non-empty bucket (for CSV/JSON)."""
        mean, sd, pos = self.mean(), self.std(), self.position()
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        rows = []
        for b in range(len(self.count)):
            if self.count[b] == 0 and self.nonfinite[b] == 0:
                continue
            rows.append(
                {
                    "pos_lo": int(self.edges[b]),
                    "pos_hi": int(self.edges[b + 1] - 1),
                    "position": _f(pos[b]),
                    "n": int(self.count[b]),
                    "mean": _f(mean[b]),
                    "std": _f(sd[b]),
                    "max": _f(self.maximum[b]) if self.count[b] else None,
                    "p50": _f(p50[b]),
                    "p99": _f(p99[b]),
                    "zeros": int(self.zeros[b]),
                    "nonfinite": int(self.nonfinite[b]),
                }
            )
        return rows


def _f(x: float) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None
