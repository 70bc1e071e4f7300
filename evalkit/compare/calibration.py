"""What a log-probability margin means in accuracy: a regression across committed sweep cells.

Each non-baseline arm of a sweep (`evalkit sweep --out DIR`: one run directory per arm and a
`sweep.json` naming the baseline) gives, per task × length cell, the mean paired shift of the
gold answer's log-probability (candidate − baseline, nats per answer token, from the samples)
and the exact-match change in pp. The positive controls (m2…m5, the round-to-zero arms) span
losses from none to total, so an ordinary least-squares line of pp change on Δ nats/token
across those cells says what accuracy change a given shift predicts. Cells whose baseline is at
the floor (it cannot lose) are left out. The prediction at the plan's margin comes with a 95%
prediction interval: it is a description of the committed sweeps, not a guarantee.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evalkit.compare.logprob import _per_token
from evalkit.compare.pairing import pair_runs
from evalkit.errors import InputError
from evalkit.stats._result import Result
from evalkit.store import has_samples, load_finished_run

FLOOR = 0.02


@dataclass(frozen=True)
class CalibrationCell:
    sweep: str
    arm: str
    task: str
    length: int | None
    n: int
    delta_nats_per_token: float
    delta_pp: float


def sweep_calibration_cells(sweep_dir: str | Path) -> list[CalibrationCell]:
    """Per arm × task × length of one sweep: (mean Δ nats/token, Δ exact match pp), from the samples."""
    root = Path(sweep_dir)
    try:
        meta = json.loads((root / "sweep.json").read_text(encoding="utf-8"))
    except OSError:
        raise InputError(f"{root}: not an `evalkit sweep` directory (no readable sweep.json)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{root}/sweep.json: not JSON ({exc.msg})") from None
    baseline = meta.get("baseline") if isinstance(meta, dict) else None
    if not isinstance(baseline, str) or not (root / baseline).is_dir():
        raise InputError(f"{root}/sweep.json names no baseline arm directory")
    base = load_finished_run(root / baseline, "baseline")
    cells = []
    for arm_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != baseline):
        if not has_samples(arm_dir):
            continue
        pairing = pair_runs(base, load_finished_run(arm_dir, arm_dir.name), intersection=True)
        seen = set()
        for (task, _metric, length), pairs in pairing.rows.items():
            if (task, length) in seen:  # every metric of a cell pairs the same questions
                continue
            seen.add((task, length))
            base_acc = sum(p.baseline for p in pairs) / len(pairs)
            shifts = [
                (c - b)
                for p in pairs
                if (b := _per_token(p.baseline_sample or {})) is not None
                and (c := _per_token(p.candidate_sample or {})) is not None
            ]
            if base_acc <= FLOOR or not shifts:
                continue
            delta_pp = 100.0 * (sum(p.candidate for p in pairs) - sum(p.baseline for p in pairs)) / len(pairs)
            cells.append(
                CalibrationCell(
                    str(root), arm_dir.name, task, length, len(pairs), float(np.mean(shifts)), delta_pp
                )
            )
    return cells


@dataclass(frozen=True)
class LogprobCalibration(Result):
    n_cells: int
    slope_pp_per_nat: float  # pp of exact match per nat/token of mean shift
    slope_ci: tuple[float, float]
    intercept_pp: float
    r_squared: float
    margin: float  # nats/token
    predicted_pp_at_margin: float  # the change a mean shift of -margin predicts
    prediction_interval: tuple[float, float]
    sources: tuple[str, ...]
    title: ClassVar[str] = "Log-prob margin calibrated on sweep cells (OLS of Δ pp on Δ nats/token)"

    def sentence(self) -> str:
        lo, hi = self.prediction_interval
        return (
            f"a mean shift of −{self.margin:g} nats/token predicts "
            f"{self.predicted_pp_at_margin:+.2f} pp exact match (95% prediction interval "
            f"{lo:+.2f} to {hi:+.2f} pp; OLS over {self.n_cells} sweep cells, R² {self.r_squared:.2f})"
        )


def calibrate(cells: list[CalibrationCell], margin: float) -> LogprobCalibration:
    """OLS of Δ pp on Δ nats/token (statsmodels), and its prediction at a shift of -margin."""
    import statsmodels.api as sm

    if len(cells) < 3:
        raise InputError(
            f"a log-prob calibration needs at least 3 sweep cells with gold_logprob, got {len(cells)}"
        )
    x = np.array([c.delta_nats_per_token for c in cells])
    y = np.array([c.delta_pp for c in cells])
    if np.ptp(x) == 0:
        raise InputError("the sweep cells' log-prob shifts are all equal: nothing to calibrate against")
    fit = sm.OLS(y, sm.add_constant(x)).fit()
    lo, hi = fit.conf_int(0.05)[1]
    pred = fit.get_prediction(np.array([[1.0, -margin]])).summary_frame(alpha=0.05)
    return LogprobCalibration(
        n_cells=len(cells),
        slope_pp_per_nat=float(fit.params[1]),
        slope_ci=(float(lo), float(hi)),
        intercept_pp=float(fit.params[0]),
        r_squared=float(fit.rsquared) if math.isfinite(fit.rsquared) else 0.0,
        margin=margin,
        predicted_pp_at_margin=float(pred["mean"].iloc[0]),
        prediction_interval=(float(pred["obs_ci_lower"].iloc[0]), float(pred["obs_ci_upper"].iloc[0])),
        sources=tuple(sorted({c.sweep for c in cells})),
    )


def calibration_record(calibration: LogprobCalibration) -> dict[str, Any]:
    """The plain dict a plan file stores (and a report shows beside the margin)."""
    record = calibration.to_dict()
    record["slope_ci"] = list(record["slope_ci"])
    record["prediction_interval"] = list(record["prediction_interval"])
    record["sources"] = list(record["sources"])
    record["sentence"] = calibration.sentence()
    return record
