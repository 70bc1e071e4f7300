"""Statistics across independent prompts: the unit of replication of a drift study.

Positions within one trajectory are strongly autocorrelated (a state error, once made, stays),
so neither per-position variances nor a fit over one trajectory's buckets give honest CIs. Prompts
are independent draws, so:
- a bucketed metric is summarised by its per-prompt bucket means: their mean with a Student-t CI
  on n_prompts - 1 degrees of freedom, and exact order statistics across prompts;
- a growth exponent is fitted **per prompt** (ordinary least squares of log(bucket mean) on
  log(position) over a stated range: each log-spaced bucket one point) and the slopes are
  summarised the same way (mean, t-CI across prompts). `tests/test_drift_growth_ci.py` checks
  the CI's coverage on synthetic power laws with AR(1) noise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from evalkit.drift.growth import fit_rate_growth

LEVEL = 0.95
FLAT_BELOW = 0.1  # |exponent| below this is "flat" whatever its CI
INCONCLUSIVE_WIDTH = 1.0  # a CI containing 0 but wider than this says "no clear trend", not "flat"
# One prompt's slope needs no residual degrees of freedom of its own (its CI comes from the spread
# across prompts), so three fit points do; prefill mode has one per octave (`fit_points`), whose
# centres span a little under 4x when the last octave is cut short (16k..127k: 22.6k to 90k).
MIN_POINTS = 3
MIN_CENTRE_SPAN = 3.0


def mean_ci(values, level: float = LEVEL) -> dict:
    """Mean, sd and t-CI of independent values (NaN/None left out), with exact quantiles."""
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    v = v[np.isfinite(v)]
    n = int(v.size)
    out = {
        "n": n,
        "mean": None,
        "sd": None,
        "ci_low": None,
        "ci_high": None,
        "p50": None,
        "min": None,
        "max": None,
    }
    if n == 0:
        return out
    out.update(mean=float(v.mean()), p50=float(np.quantile(v, 0.5)), min=float(v.min()), max=float(v.max()))
    if n >= 2:
        sd = float(v.std(ddof=1))
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / np.sqrt(n)
        out.update(sd=sd, ci_low=out["mean"] - half, ci_high=out["mean"] + half)
    return out


def ols_slope(position, mean, start: float, stop: float | None = None) -> tuple[float | None, str]:
    """Slope of log(mean) on log(position) over buckets in [start, stop]; zero buckets are left
    out. Returns (slope, "") or (None, why): "zero" when every bucket in range is 0, else
    "insufficient" (fewer than MIN_POINTS non-zero buckets, or centres less than MIN_CENTRE_SPAN x
    apart)."""
    pos, m = np.asarray(position, dtype=np.float64), np.asarray(mean, dtype=np.float64)
    rng = np.isfinite(pos) & np.isfinite(m) & (pos >= start) & (pos <= (stop or np.inf))
    use = rng & (m > 0)
    if rng.any() and not use.any():
        return None, "zero"
    if use.sum() < MIN_POINTS or pos[use].max() / pos[use].min() < MIN_CENTRE_SPAN:
        return None, "insufficient"
    x, y = np.log(pos[use]), np.log(m[use])
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc**2).sum()), ""


def rate_slope(position, events, n, start: float, stop: float | None = None) -> tuple[float | None, str]:
    """Slope of a rare event's rate (top-1 flips) per prompt: Poisson regression, zeros kept."""
    pos = np.asarray(position, dtype=np.float64)
    keep = np.isfinite(pos) & (pos <= (stop or np.inf))
    f = fit_rate_growth(
        pos[keep], np.asarray(events)[keep], np.asarray(n)[keep], metric="r", min_position=start
    )
    return (f.slope, "") if f.slope is not None else (None, f.verdict)


@dataclass(frozen=True)
class SlopeSummary:
    """One metric's growth exponent across prompts over one fitting range."""

    metric: str
    start: float
    stop: float
    n_prompts: int  # prompts with a slope
    n_zero: int  # prompts whose metric is exactly 0 over the range
    n_insufficient: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # grows | shrinks | flat | inconclusive (CI holds 0 but is wide) | zero | insufficient
    slopes: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize_slopes(
    metric: str, slopes: list[tuple[float | None, str]], start: float, stop: float, level: float = LEVEL
) -> SlopeSummary:
    """Mean and t-CI of the per-prompt slopes (prompts are independent: the CI is across them)."""
    got = [s for s, _ in slopes if s is not None]
    n_zero = sum(1 for s, why in slopes if s is None and why == "zero")
    n_ins = sum(1 for s, why in slopes if s is None and why != "zero")
    c = mean_ci(got, level)
    if not got:
        verdict = "zero" if n_zero and not n_ins else "insufficient"
    elif c["ci_low"] is None:
        verdict = "insufficient" if abs(c["mean"]) >= FLAT_BELOW else "flat"
    elif c["ci_low"] <= 0 <= c["ci_high"] and c["ci_high"] - c["ci_low"] > INCONCLUSIVE_WIDTH:
        verdict = "inconclusive"
    elif c["ci_low"] <= 0 <= c["ci_high"] or abs(c["mean"]) < FLAT_BELOW:
        verdict = "flat"
    else:
        verdict = "grows" if c["mean"] > 0 else "shrinks"
    return SlopeSummary(
        metric=metric,
        start=float(start),
        stop=float(stop),
        n_prompts=c["n"],
        n_zero=n_zero,
        n_insufficient=n_ins,
        mean=c["mean"],
        sd=c["sd"],
        ci_low=c["ci_low"],
        ci_high=c["ci_high"],
        verdict=verdict,
        slopes=[float(s) for s in got],
    )


def ratio_ci(num, den, level: float = LEVEL) -> dict:
    """Ratio of two paired positive per-prompt values (arm / floor): geometric mean of the
    per-prompt ratios with a t-CI on the log scale; None where a denominator is 0."""
    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    out = {
        "n": int(ok.sum()),
        "ratio": None,
        "ci_low": None,
        "ci_high": None,
        "den_zero": int((b == 0).sum()),
    }
    if not ok.any():
        return out
    c = mean_ci(np.log(a[ok] / b[ok]), level)
    out["ratio"] = float(np.exp(c["mean"]))
    if c["ci_low"] is not None:
        out.update(ci_low=float(np.exp(c["ci_low"])), ci_high=float(np.exp(c["ci_high"])))
    return out
