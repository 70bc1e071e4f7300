"""Does an error grow with length? Slope of log(bucket mean) against log(position), with a CI.

Fit: weighted least squares of y_b = log(mean_b) on x_b = log(position_b) over the log-spaced
buckets, with Var(y_b) ≈ sd_b² / (n_b mean_b²) (delta method) as the weights. Neighbouring
positions are correlated, so those within-bucket variances are optimistic; when the points
scatter around the line more than they allow (reduced chi² > 1), the standard error is inflated
by sqrt(reduced chi²) (the usual scale-factor rule), and the CI uses Student's t on n - 2
degrees of freedom. Points without any spread (one value each, e.g. state errors at checkpoints)
get plain OLS with the residual standard error. Buckets whose mean is 0 cannot be logged and
are left out (and counted). Rare 0/1 events (top-1 flips) use `fit_rate_growth` instead: a
Poisson regression of the event counts that keeps the buckets with no event.

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


def fit_growth(
    position: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    n: np.ndarray,
    *,
    metric: str,
    label: str | None = None,
    min_position: float = 1.0,
    flat_below: float = 0.1,
    level: float = 0.95,
    min_count: int = 2,
    pos_lo: np.ndarray | None = None,
    pos_hi: np.ndarray | None = None,
) -> GrowthFit:
    """Fit one metric's bucket means; `label` names the metric in the verdict text, and the
    buckets' first/last positions (`pos_lo`, `pos_hi`; default `position`) name the range."""
    label = label or metric
    position, mean, std, n = (np.asarray(a, dtype=np.float64) for a in (position, mean, std, n))
    in_range = np.isfinite(position) & (position >= min_position) & (n >= min_count) & np.isfinite(mean)
    zero = in_range & (mean <= 0)
    use = in_range & (mean > 0)
    n_zero = int(zero.sum())
    empty = GrowthFit(metric, None, None, None, None, None, int(use.sum()), n_zero, None, None, None, "", "")
    if in_range.sum() > 0 and use.sum() == 0:
        empty.verdict = "zero"
        empty.text = f"{label} is exactly 0 at every position from {format_position(min_position)}"
        return empty
    span = position[use].max() / position[use].min() if use.any() else 1.0
    if use.sum() < MIN_BUCKETS or span < MIN_SPAN:
        empty.verdict = "insufficient"
        empty.text = (
            f"{label}: too few non-zero buckets to fit a trend ({int(use.sum())} over a "
            f"{span:.1f}x range of positions; need {MIN_BUCKETS} over {MIN_SPAN:.0f}x)"
        )
        return empty
    x = np.log(position[use])
    y = np.log(mean[use])
    sd = np.where(np.isfinite(std[use]), std[use], 0.0)
    var_y = sd**2 / (n[use] * mean[use] ** 2)
    # A bucket whose values are all equal has zero variance: floor it at the smallest positive
    # variance seen (or give equal weights if none is positive) instead of an infinite weight.
    pos_var = var_y[var_y > 0]
    known = pos_var.size > 0  # without any within-bucket spread (one value per point): plain OLS
    var_y = np.maximum(var_y, pos_var.min()) if known else np.ones_like(var_y)
    w = 1.0 / var_y
    X = np.column_stack([np.ones_like(x), x])
    XtW = X.T * w
    cov = np.linalg.inv(XtW @ X)
    beta = cov @ (XtW @ y)
    resid = y - X @ beta
    dof = len(y) - 2
    chi2_red = float((w * resid**2).sum() / dof) if dof > 0 else float("nan")
    if not np.isfinite(chi2_red):
        scale = 1.0
    else:
        scale = float(np.sqrt(chi2_red)) if not known else max(1.0, float(np.sqrt(chi2_red)))
    slope = float(beta[1])
    se = float(np.sqrt(cov[1, 1]) * scale)
    lo, hi = _t_interval(slope, se, dof, level)
    p_from, p_to = _position_range(position, use, pos_lo, pos_hi)
    first, last = mean[use][np.argmin(position[use])], mean[use][np.argmax(position[use])]
    note = f"{level:.0%} CI {lo:.2f} to {hi:.2f}"
    verdict, text = _verdict(label, slope, lo, hi, flat_below, p_from, p_to, note)
    if n_zero:
        text += f"; {n_zero} bucket(s) exactly 0 left out"
    return GrowthFit(
        metric,
        slope,
        se,
        lo,
        hi,
        scale,
        int(use.sum()),
        n_zero,
        p_from,
        p_to,
        float(last / first),
        verdict,
        text,
    )


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
