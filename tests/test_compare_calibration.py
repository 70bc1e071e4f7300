"""issue 38: the log-prob margin calibrated against accuracy across sweep cells, on synthetic
sweeps with a planted relation (and numpy's independent least squares for a noisy one)."""

import json

import numpy as np
import pytest
import yaml

from evalkit.cli import main
from evalkit.compare.calibration import calibrate, sweep_calibration_cells
from evalkit.errors import InputError
from tests.helpers.runs import write_run


def _sweep(root, arms, n=100, base_right=80, floor_task=False):
    """arms: {label: (questions lost (>0) or gained (<0), per-token shift)}; 2 gold tokens each."""
    root.mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"baseline": "fp32"}))

    def outcomes(lost):
        out = {}
        for doc in range(n):
            right = doc < base_right
            if lost > 0 and doc < lost:
                right = False
            if lost < 0 and base_right <= doc < base_right - lost:
                right = True
            out[("t", doc, None)] = right
            if floor_task:
                out[("floor", doc, None)] = False
        return out

    def gold(shift):
        return lambda task, doc, length: {"gold_logprob": 2 * (-0.5 + shift), "gold_tokens": [1, 2]}

    write_run(root / "fp32", "fp32", outcomes(0), extra=gold(0.0))
    for label, (lost, shift) in arms.items():
        write_run(root / label, label, outcomes(lost), extra=gold(shift))
    return root


def test_a_planted_linear_relation_is_recovered(tmp_path):
    # delta pp = 200 x delta nats/token exactly: lose 5 questions of 100 per -0.025 nats/token
    arms = {f"m{k}": (5 * k, -0.025 * k) for k in (1, 2, 3)} | {"gain": (-4, 0.02)}
    cells = sweep_calibration_cells(_sweep(tmp_path / "s", arms, floor_task=True))
    assert {c.task for c in cells} == {"t"}  # the floor task (baseline 0%) cannot lose: left out
    res = calibrate(cells, 0.01)
    assert res.n_cells == 4
    assert res.slope_pp_per_nat == pytest.approx(200.0, rel=1e-9)
    assert res.intercept_pp == pytest.approx(0.0, abs=1e-9)
    assert res.predicted_pp_at_margin == pytest.approx(-2.0, abs=1e-9)
    assert "−0.01 nats/token predicts -2.00 pp" in res.sentence()


def test_noisy_cells_match_numpy_least_squares(tmp_path):
    rng = np.random.default_rng(5)
    shifts = np.linspace(-0.2, 0.0, 7)
    lost = np.clip(np.round(-150 * shifts + rng.normal(0, 3, shifts.size)), 0, 70).astype(int)
    arms = {f"a{i}": (int(k), float(s)) for i, (k, s) in enumerate(zip(lost, shifts))}
    cells = sweep_calibration_cells(_sweep(tmp_path / "s", arms))
    res = calibrate(cells, 0.01)
    x = np.array([c.delta_nats_per_token for c in cells])
    y = np.array([c.delta_pp for c in cells])
    slope, intercept = np.polyfit(x, y, 1)
    assert res.slope_pp_per_nat == pytest.approx(slope, rel=1e-9)
    assert res.intercept_pp == pytest.approx(intercept, abs=1e-9)
    lo, hi = res.prediction_interval
    assert lo < res.predicted_pp_at_margin < hi


def test_too_few_cells_or_no_sweep_is_an_input_error(tmp_path):
    cells = sweep_calibration_cells(_sweep(tmp_path / "s", {"m1": (5, -0.025)}))
    with pytest.raises(InputError, match="at least 3"):
        calibrate(cells, 0.01)
    with pytest.raises(InputError, match="not an `evalkit sweep` directory"):
        sweep_calibration_cells(tmp_path)


def test_the_plan_records_the_calibration_and_compare_shows_it(tmp_path, capsys):
    arms = {f"m{k}": (5 * k, -0.025 * k) for k in (1, 2, 3)}
    sweep = _sweep(tmp_path / "s", arms)
    out = tmp_path / "plan.yaml"
    rc = main(
        ["plan", "--discordance", "0.1", "--cell", "t", "--margin", "0.05", "--gate", "exact_match"]
        + ["--calibrate-from", str(sweep), "--out", str(out)]
    )
    assert rc == 0
    record = yaml.safe_load(out.read_text())["logprob_calibration"]
    assert record["slope_pp_per_nat"] == pytest.approx(200.0) and record["n_cells"] == 3
    capsys.readouterr()
    main(["compare", str(sweep / "fp32"), str(sweep / "m1"), "--plan", str(out)])
    md = capsys.readouterr().out
    assert "Log-prob margin in accuracy terms: a mean shift of −0.01 nats/token predicts -2.00 pp" in md
