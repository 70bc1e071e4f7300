"""issue 12: `evalkit plan` and the power functions behind it, on hand-computed cases
(statistics.md section 3 and 5), statsmodels, and a simulation of the score test."""

import json
import math

import numpy as np
import pytest
from statsmodels.stats.power import NormalIndPower

from evalkit import stats as st
from evalkit.cli import main
from evalkit.compare.plan import plan
from evalkit.stats.paired_ci import tango_score


def test_statistics_md_worked_examples():
    # psi 3%, true difference 0, delta 1 pp: n ~ 2,510; at n = 1319 the power is 0.52
    assert st.noninferiority_sample_size(0.03, 0.01) == pytest.approx(2510, abs=1)
    assert st.noninferiority_power(0.03, 0.01, 1319) == pytest.approx(0.52, abs=0.005)
    # Connor: n for a 1 pp loss at psi = 0.029568 is 2318.4
    assert st.connor_sample_size(0.01, 0.029568) == pytest.approx(2318.4, abs=0.1)


def test_normal_sample_size_matches_statsmodels():
    """With equal sds the formula is the one-sample one-sided z-test statsmodels solves."""
    sd, effect = 0.17, 0.01
    ours = st.normal_sample_size(effect, sd, sd, power=0.8, alpha=0.025)
    theirs = NormalIndPower().solve_power(effect / sd, alpha=0.025, power=0.8, ratio=0, alternative="larger")
    assert ours == pytest.approx(theirs, rel=1e-6)


def test_planned_n_gives_the_planned_power_in_simulation():
    psi, margin = 0.10, 0.03
    n = math.ceil(st.noninferiority_sample_size(psi, margin))
    rng = np.random.default_rng(0)
    counts = rng.multinomial(n, [psi / 2, psi / 2, 1 - psi], size=4000)
    z = np.array([tango_score(int(b), int(c), n, -margin) for b, c, _ in counts])
    assert np.mean(z > 1.959964) == pytest.approx(0.8, abs=0.03)


def _pilot(rows):
    return {"rows": rows}


def test_plan_rows_and_rule_of_three():
    pilot = _pilot(
        [
            {
                "task": "gsm8k",
                "metric": "em",
                "length": None,
                "n": 1319,
                "baseline_only": 21,
                "candidate_only": 18,
            },
            {
                "task": "passkey",
                "metric": "em",
                "length": 4096,
                "n": 100,
                "baseline_only": 0,
                "candidate_only": 0,
            },
        ]
    )
    res = plan(pilot, 0.01, 0.8, 0.02, "pilot.json")
    gsm, pk = res["rows"]
    assert gsm["n_noninferiority"] == math.ceil(st.noninferiority_sample_size(39 / 1319, 0.01))
    assert gsm["n_detect_loss"] == math.ceil(st.connor_sample_size(0.02, 39 / 1319))
    assert pk["psi"] == 0.03 and "rule of three" in pk["psi_source"]
    assert pk["n_noninferiority"] == math.ceil(st.noninferiority_sample_size(0.03, 0.01))
    assert pk["psi_loss"] == 0.03  # d = 2 pp < psi


def test_plan_cli(tmp_path, capsys):
    path = tmp_path / "pilot.json"
    path.write_text(
        json.dumps(
            _pilot(
                [
                    {
                        "task": "t",
                        "metric": "em",
                        "length": None,
                        "n": 1319,
                        "baseline_only": 21,
                        "candidate_only": 18,
                    }
                ]
            )
        )
    )
    assert main(["plan", str(path), "--margin", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "| t | em | – | 1319 | 2.96% | 2478 (0.52) |" in out
    bad = tmp_path / "bad.json"
    for text in ("{}", "[1]", json.dumps(_pilot([{"task": "t"}])), "nope"):
        bad.write_text(text)
        assert main(["plan", str(bad)]) == 2
    assert main(["plan", str(path), "--power", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("evalkit plan: error:") == 5


def test_help_lists_plan_and_renders():
    import subprocess
    import sys

    top = subprocess.run([sys.executable, "-m", "evalkit", "--help"], capture_output=True, text=True)
    sub = subprocess.run([sys.executable, "-m", "evalkit", "plan", "--help"], capture_output=True, text=True)
    assert top.returncode == 0 and "plan" in top.stdout
    assert sub.returncode == 0 and "--effect" in sub.stdout
