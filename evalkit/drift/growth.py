"""Does a rare event's rate grow with length? One trajectory's Poisson fit of its bucket counts.

A top-1 flip is a 0/1 event: most buckets may have none, so logs of bucket rates fail. The study
fits each prompt's slope (`evalkit.drift.across.rate_slope`) by a Poisson regression of the event
counts that keeps the buckets with no event (`fit_rate_growth`); continuous metrics get OLS on
log(bucket mean) there (`across.ols_slope`). A fit needs a few buckets over at least two octaves.

Verdict: "flat" when the CI contains 0 or |slope| < `flat_below`; otherwise "grows ∝ L^a"
(or "shrinks ∝ L^-a") over the positions that were fitted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from evalkit.drift.positions import format_position

# A slope needs a few points spread over at least two octaves of position to mean anything.
MIN_BUCKETS = 4
MIN_SPAN = 4.0


@dataclass
class GrowthFit:
    metric: str
    slope: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    scale: float | None  # sqrt(reduced chi²) applied to the SE (1.0 = not inflated)
    n_buckets: int  # buckets fitted
    n_zero_buckets: int  # buckets in range left out because their mean is exactly 0
    pos_from: float | None
    pos_to: float | None
    ratio_last_first: float | None  # mean of the last fitted bucket / mean of the first
    verdict: str  # "grows" | "shrinks" | "flat" | "zero" | "insufficient"
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


def fit_rate_growth(
    position: np.ndarray,
    events: np.ndarray,
    n: np.ndarray,
    *,
    metric: str,
    label: str | None = None,
    min_position: float = 1.0,
    flat_below: float = 0.1,
    level: float = 0.95,
    min_events: int = 5,
    pos_lo: np.ndarray | None = None,
    pos_hi: np.ndarray | None = None,
) -> GrowthFit:
    """Growth of a rare event's rate (e.g. top-1 flips): events_b ~ Poisson(n_b · c · position_b^slope).

    Taking logs of bucket rates fails here (most buckets may have no flip at all), so the slope
    comes from a Poisson regression with log link and offset log(n_b), fitted by IRLS over every
    bucket, zeros included. Over-dispersion (Pearson chi² / dof > 1, e.g. flips that come in
    runs) inflates the SE by its square root (quasi-Poisson); the CI uses Student's t on n - 2 dof.
    """
    label = label or metric
    position, events, n = (np.asarray(a, dtype=np.float64) for a in (position, events, n))
    use = np.isfinite(position) & (position >= min_position) & (n > 0)
    total = float(events[use].sum())
    blank = GrowthFit(metric, None, None, None, None, None, int(use.sum()), 0, None, None, None, "", "")
    if use.sum() > 0 and total == 0:
        blank.verdict = "zero"
        blank.text = f"{label} is exactly 0 at every position from {format_position(min_position)}"
        return blank
    span = position[use].max() / position[use].min() if use.any() else 1.0
    if use.sum() < MIN_BUCKETS or span < MIN_SPAN or total < min_events:
        blank.verdict = "insufficient"
        blank.text = (
            f"{label}: too few events to fit a trend ({total:.0f} in {int(use.sum())} buckets "
            f"over a {span:.1f}x range of positions)"
        )
        return blank
    x, k, off = np.log(position[use]), events[use], np.log(n[use])
    X = np.column_stack([np.ones_like(x), x])
    beta = np.array([np.log(total / n[use].sum()), 0.0])
    try:
        if int((k > 0).sum()) < 2:  # all events in one bucket: the likelihood has no finite maximum
            raise np.linalg.LinAlgError
        for _ in range(100):
            mu = np.exp(off + X @ beta)
            z = X @ beta + (k - mu) / mu
            XtW = X.T * mu
            new = np.linalg.solve(XtW @ X, XtW @ z)
            if np.max(np.abs(new - beta)) < 1e-12:
                beta = new
                break
            beta = new
        mu = np.exp(off + X @ beta)
        cov = np.linalg.inv((X.T * mu) @ X)
        if not (np.isfinite(beta).all() and np.isfinite(cov).all()):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        blank.verdict = "insufficient"
        blank.text = f"{label}: its {total:.0f} events give no finite trend (they sit in one or two buckets)"
        return blank
    dof = len(k) - 2
    pearson = float(((k - mu) ** 2 / mu).sum() / dof) if dof > 0 else float("nan")
    scale = max(1.0, float(np.sqrt(pearson))) if np.isfinite(pearson) else 1.0
    slope, se = float(beta[1]), float(np.sqrt(cov[1, 1]) * scale)
    lo, hi = _t_interval(slope, se, dof, level)
    p_from, p_to = _position_range(position, use, pos_lo, pos_hi)
    rate = k / n[use]
    first, last = rate[np.argmin(x)], rate[np.argmax(x)]
    ratio = float(last / first) if first > 0 else None
    note = f"{level:.0%} CI {lo:.2f} to {hi:.2f}, {total:.0f} events"
    verdict, text = _verdict(label, slope, lo, hi, flat_below, p_from, p_to, note)
    return GrowthFit(metric, slope, se, lo, hi, scale, int(use.sum()), 0, p_from, p_to, ratio, verdict, text)


def _t_interval(slope: float, se: float, dof: int, level: float) -> tuple[float, float]:
    """The slope's confidence interval at `level` from Student's t on `dof` (unbounded without dof)."""
    tq = float(stats.t.ppf(0.5 + level / 2, dof)) if dof > 0 else float("inf")
    return slope - tq * se, slope + tq * se


def _position_range(
    position: np.ndarray, use: np.ndarray, pos_lo: np.ndarray | None, pos_hi: np.ndarray | None
) -> tuple[float, float]:
    """First and last position the fitted buckets cover (their edges when given, else their positions)."""
    lo_edge = np.asarray(pos_lo if pos_lo is not None else position, dtype=np.float64)[use]
    hi_edge = np.asarray(pos_hi if pos_hi is not None else position, dtype=np.float64)[use]
    return float(lo_edge.min()), float(hi_edge.max())


def _verdict(
    label: str, slope: float, lo: float, hi: float, flat_below: float, p_from: float, p_to: float, note: str
) -> tuple[str, str]:
    """flat (the CI holds 0 or the slope is below `flat_below`), grows or shrinks, and its sentence."""
    rng = f"from {format_position(p_from)} to {format_position(p_to)}"
    if lo <= 0 <= hi or abs(slope) < flat_below:
        return "flat", f"{label} is flat {rng} (slope {slope:.2f}, {note})"
    if slope > 0:
        return "grows", f"{label} grows ∝ L^{slope:.2f} {rng} ({note})"
    return "shrinks", f"{label} shrinks ∝ L^{slope:.2f} {rng} ({note})"
