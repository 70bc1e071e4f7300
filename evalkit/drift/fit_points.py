"""The points a growth fit and an "at L1" ratio read: a prompt's buckets merged into fair samples.

Two artefacts of the raw log-spaced buckets (`positions.bucket_edges`) bias a per-prompt fit:
- **the trailing sliver**: at a power-of-two length the last bucket holds one position, the last
  token. A per-position KL is heavy-tailed (a bucket's mean is carried by rare large values, one
  position is a typical, far smaller, value), so that single point pulled the 48B-dims fits from
  16k to L^-3.5 and made "X× the floor at 128k" a ratio of two single tokens;
- **the prefill sawtooth**: a state rounded once per chunk is diluted by exact fp32 updates as the
  chunk goes on, so the error is largest just after a store and smallest at a chunk's end; a
  bucket covering part of a chunk samples one phase of that cycle (the 4096-token chunks of the
  H200 studies: 1.1e-5 in [4096, 5792], 1.7e-7 in [5793, 8191]).

So in prefill mode every point ends at a chunk end: whole chunks, up to the one position by which
the power-of-two edges sit off the chunk starts (a chunk size that is not a power of two, which
those edges never meet, closes a point once it spans MANY_CHUNKS chunks, which bounds the bias).
In either mode a last point narrower than half of the one before it joins that one. Means and
positions merge exactly from the count, mean and geometric-mean position each prompt keeps per
bucket; quantiles do not merge and are not fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SLIVER = 0.5  # a last point narrower than this fraction of the one before it joins that one
MANY_CHUNKS = 2  # a chunk size the edges never meet: close a point once it spans this many chunks


@dataclass
class FitPoint:
    pos_lo: int
    pos_hi: int
    n: int  # finite values
    total: float  # their sum
    total_logpos: float  # sum of log(position) over them

    @property
    def width(self) -> int:
        return self.pos_hi - self.pos_lo + 1

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    @property
    def position(self) -> float:
        """Geometric mean position of the values (as the raw buckets report it)."""
        return math.exp(self.total_logpos / self.n) if self.n else math.nan

    def absorb(self, other: FitPoint) -> None:
        self.pos_lo, self.pos_hi = min(self.pos_lo, other.pos_lo), max(self.pos_hi, other.pos_hi)
        self.n += other.n
        self.total += other.total
        self.total_logpos += other.total_logpos


def fit_points(rows: list[dict], chunk_size: int | None = None) -> list[FitPoint]:
    """Merge one prompt's bucket rows of one arm and metric (`pos_lo`, `pos_hi`, `n`, `mean`,
    `position`, as `BucketStats.rows` writes them) into fit points; `chunk_size` in prefill mode."""
    aligned = bool(chunk_size) and chunk_size & (chunk_size - 1) == 0  # powers of two are edges
    points: list[FitPoint] = []
    open_: FitPoint | None = None
    for r in sorted(rows, key=lambda r: r["pos_lo"]):
        n = int(r.get("n") or 0)
        has = n > 0 and r.get("mean") is not None and r.get("position") is not None
        p = FitPoint(
            int(r["pos_lo"]),
            int(r["pos_hi"]),
            n if has else 0,
            float(r["mean"]) * n if has else 0.0,
            math.log(float(r["position"])) * n if has else 0.0,
        )
        if open_ is None:
            open_ = p
        else:
            open_.absorb(p)
        if not chunk_size or (
            (open_.pos_hi + 1) % chunk_size == 0 if aligned else open_.width >= MANY_CHUNKS * chunk_size
        ):
            points.append(open_)
            open_ = None
    if open_ is not None:
        points.append(open_)
    if len(points) >= 2 and is_sliver(points[-1].width, points[-2].width):
        last = points.pop()
        points[-1].absorb(last)
    return points


def is_sliver(last_width: int, width_before: int) -> bool:
    """Whether a last bucket or point is too narrow to stand for its positions (the one rule)."""
    return last_width < SLIVER * width_before


def without_sliver(rows: list[dict]) -> list[dict]:
    """One series of bucket rows (sorted by position) without a last bucket narrower than SLIVER
    of the one before it: what a plot of bucket means leaves out, for the reason a fit merges it."""
    if len(rows) < 2:
        return rows
    before, last = (int(r["pos_hi"]) - int(r["pos_lo"]) + 1 for r in rows[-2:])
    return rows[:-1] if is_sliver(last, before) else rows
