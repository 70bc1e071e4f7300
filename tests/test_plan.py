"""issue 12: `evalkit plan` and the power functions behind it, on published values (the project's
statistics notes, statistics.md sections 3 and 5, and decision-protocol.md section 3: copied below
with their sources), statsmodels, and a simulation of the score test."""

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


# Published values, copied here with their sources (the project's statistics notes, which live
# outside this repository with the other reference notes):
# - statistics.md §3: psi 3%, true difference 0, delta 1 pp: the Tango/Nam plan needs n ~ 2,510.
# - statistics.md §5: n = 1319, psi = 39/1319: Connor needs n ~ 2,319 for a 1 pp loss (2318.4 in
#   its §8 table) and has power 0.56 against it at n = 1319.
# - decision-protocol.md §3 table (n = 40, Delta = .10, alpha = .05 two-sided), exact / mid-p /
#   Connor power at psi = .10: 0.206 / 0.371 / 0.517; .15: 0.196 / 0.310 / 0.368; .20: 0.172 /
#   0.257 / 0.288; .30: 0.134 / 0.191 / 0.207; and 80% power at psi = .2, Delta = .1: Connor n = 155.
DECISION_PROTOCOL_N40 = {  # psi -> (exact, mid-p, Connor) power
    0.10: (0.206, 0.371, 0.517),
    0.15: (0.196, 0.310, 0.368),
    0.20: (0.172, 0.257, 0.288),
    0.30: (0.134, 0.191, 0.207),
}


def _row(task, n, b, c, length=None):
    return {"task": task, "metric": "em", "length": length, "n": n, "baseline_only": b, "candidate_only": c}


def test_plan_rows_and_rule_of_three():
    """Against the published values above: the gsm8k pilot (21/18 of 1319) for a 1 pp loss, and a
    pilot with no discordant question, planned at the rule-of-three psi = 3/100 = 3%."""
    res = plan(_pilot([_row("gsm8k", 1319, 21, 18), _row("passkey", 100, 0, 0, 4096)]), 0.01, 0.8, 0.01, "p")
    gsm, pk = res["rows"]
    assert gsm["psi"] == pytest.approx(0.029568, abs=1e-6) and gsm["psi_source"] == "pilot"
    assert gsm["n_detect_loss"] == 2319
    assert gsm["power_detect_loss_at_pilot_n"] == pytest.approx(0.56, abs=0.005)
    assert pk["psi"] == 0.03 and "rule of three" in pk["psi_source"]
    assert pk["n_noninferiority"] == pytest.approx(2510, abs=1)
    assert pk["psi_loss"] == 0.03 and pk["loss_note"] == ""  # d = 1 pp < psi


def test_plan_detects_a_loss_with_connors_published_power():
    """n = 40 pilots with psi = .15 and .20, d = 10 pp: Connor's power at the pilot's n and the n
    for 80% power as published; a pilot with psi = .05 < d is planned at psi = d (.10)."""
    rows = [_row("a", 40, 1, 1), _row("b", 40, 5, 1), _row("c", 40, 6, 2)]
    low, mid, high = plan(_pilot(rows), 0.01, 0.8, 0.1, "p")["rows"]
    assert low["psi_loss"] == 0.1 and "planned with ψ = d" in low["loss_note"]
    assert low["power_detect_loss_at_pilot_n"] == pytest.approx(DECISION_PROTOCOL_N40[0.10][2], abs=5e-4)
    assert mid["power_detect_loss_at_pilot_n"] == pytest.approx(DECISION_PROTOCOL_N40[0.15][2], abs=5e-4)
    assert high["power_detect_loss_at_pilot_n"] == pytest.approx(DECISION_PROTOCOL_N40[0.20][2], abs=5e-4)
    assert high["n_detect_loss"] == 155


@pytest.mark.parametrize("psi", sorted(DECISION_PROTOCOL_N40))
def test_connor_against_exact_power_at_n_40(psi):
    """Connor's approximation against the exact conditional McNemar power (and the mid-p test's)
    at n = 40, Delta = .10: each as published, and Connor above the exact power at every psi (an
    approximation a plan must not take for the exact test's power at small n)."""
    exact, midp, connor = DECISION_PROTOCOL_N40[psi]
    assert st.exact_power(0.10, psi, 40, mid_p=False) == pytest.approx(exact, abs=5e-4)
    assert st.exact_power(0.10, psi, 40) == pytest.approx(midp, abs=5e-4)
    assert st.connor_power(0.10, psi, 40) == pytest.approx(connor, abs=5e-4)
    assert st.connor_power(0.10, psi, 40) > st.exact_power(0.10, psi, 40, mid_p=False)


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
