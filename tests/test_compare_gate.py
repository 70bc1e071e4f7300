"""issue 19: the CI gate's exit codes, per-task margins, the JSON schema, labels, unfinished runs,
the same-run warning, test/interval consistency and the MDE wording."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.compare import SCHEMA_VERSION, VERDICTS, build_report
from evalkit.store import load_run
from tests.helpers.runs import write_cells

REPO = Path(__file__).resolve().parent.parent

# loss: 40 vs 5 of 1000; identical: 0/0 of 20; inconclusive: 21/18 of 1319 (statistics.md)
CELLS = {("gsm8k", None): (21, 18, 1319), ("passkey", 4096): (0, 0, 20), ("niah", 4096): (40, 5, 1000)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    return {
        "mixed": write_cells(root / "mixed", CELLS),
        "noninferior": write_cells(root / "ni", {("gsm8k", None): (3, 3, 3000)}),
        "identical": write_cells(root / "same", {("passkey", 4096): (0, 0, 20)}),
        "b4c0": write_cells(root / "b4c0", {("gsm8k", None): (4, 0, 50)}),
        "partial": write_cells(root / "partial", {("gsm8k", None): (1, 1, 30)}, finish=False),
    }


def _run(capsys, *args):
    rc = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "case, gate, expected",
    [
        ("mixed", None, 0),
        ("mixed", "loss", 1),
        ("mixed", "inconclusive", 1),
        ("mixed", "not-noninferior", 1),
        ("noninferior", "loss", 0),
        ("noninferior", "inconclusive", 0),
        ("noninferior", "not-noninferior", 0),
        ("identical", "loss", 0),
        ("identical", "inconclusive", 0),
        ("identical", "not-noninferior", 1),  # 20 questions cannot show 1 pp
    ],
)
def test_gate_exit_codes(runs, capsys, case, gate, expected):
    base, cand = runs[case]
    rc, out, err = _run(capsys, base, cand, *(["--fail-on", gate] if gate else []), "--format", "json")
    report = json.loads(out)
    assert rc == expected, err
    assert report["status"] == {0: "pass" if gate else "ungated", 1: "fail"}[rc]
    assert (rc == 1) == ("gate --fail-on" in err)


def test_gate_inconclusive_passes_when_only_losses_are_excluded(runs, capsys):
    base, cand = runs["mixed"]
    rc, out, _ = _run(capsys, base, cand, "--fail-on", "loss", "--format", "json")
    assert json.loads(out)["gate"]["failing"] == ["niah em @ 4096"]
    rc, out, _ = _run(capsys, base, cand, "--fail-on", "inconclusive", "--format", "json")
    assert json.loads(out)["gate"]["failing"] == ["gsm8k em", "niah em @ 4096"]


def test_usage_errors_exit_2_in_a_subprocess(runs):
    base, cand = runs["mixed"]
    for extra in (["--fail-on", "maybe"], ["--margin", "gsm8k=2"], ["--margin", "nosuchtask=0.02"]):
        res = subprocess.run(
            [sys.executable, "-m", "evalkit", "compare", str(base), str(cand), *extra],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "evalkit", "compare", str(base), str(cand), "--fail-on", "loss"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert res.returncode == 1 and "**loss**" in res.stdout


def test_per_task_margins(runs, capsys):
    base, cand = runs["mixed"]
    rc, out, _ = _run(capsys, base, cand, "--margin", "0.01,niah=0.05", "--format", "json")
    report = json.loads(out)
    margins = {r["task"]: r["margin"] for r in report["rows"]}
    assert margins == {"gsm8k": 0.01, "passkey": 0.01, "niah": 0.05}
    assert report["margins"] == {"niah": 0.05} and report["margin"] == 0.01
    (niah,) = [r for r in report["rows"] if r["task"] == "niah"]
    assert niah["verdict"] == "minor_loss"  # -3.5 pp, CI above -5 pp: within a 5 pp margin
    rc, md, _ = _run(capsys, base, cand, "--margin", "gsm8k=0.02,niah=0.05")
    assert "NI p [δ pp]" in md and "[5.00]" in md and "[2.00]" in md


def test_json_schema_and_md_json_in_one_call(runs, capsys, tmp_path):
    base, cand = runs["mixed"]
    md_file, json_file = tmp_path / "r.md", tmp_path / "r.json"
    rc, out, _ = _run(capsys, base, cand, "--md", md_file, "--json", json_file, "--fail-on", "loss")
    assert rc == 1 and out == md_file.read_text()
    report = json.loads(json_file.read_text())
    assert report["schema_version"] == SCHEMA_VERSION == 2
    assert report["status"] == "fail" and report["outcome"] == "loss"
    assert report["verdicts"] == list(VERDICTS)
    assert {r["verdict"] for r in report["rows"]} == {"loss", "identical", "inconclusive"}
    for row in report["rows"]:
        assert row["verdict"] in VERDICTS and isinstance(row["noninferior"], bool)
        assert isinstance(row["verdict_text"], str)
    assert set(report["gate"]) == {"fail_on", "measure", "status", "failing"}


def test_labels_replace_the_arm_names(runs, capsys):
    base, cand = runs["noninferior"]
    rc, out, _ = _run(capsys, base, cand, "--label-baseline", "fp32", "--label-candidate", "fp16-sr")
    assert "candidate `fp16-sr` vs baseline `fp32`" in out and "fp32 (base) %" in out


def test_unfinished_run_is_refused_unless_allowed(runs, capsys):
    base, cand = runs["partial"]
    rc, out, err = _run(capsys, base, cand)
    assert rc == 2 and "has not finished (no finished_at" in err and "--allow-partial" in err
    rc, out, err = _run(capsys, base, cand, "--allow-partial")
    assert rc == 0 and "--allow-partial: the baseline run has not finished" in out


def test_same_run_on_both_sides_warns(runs, capsys):
    base, _ = runs["mixed"]
    rc, out, err = _run(capsys, base, str(base) + "/")
    assert rc == 0 and "warning: baseline and candidate are the same run" in err
    assert "same run" in out


def test_b4_c0_row_says_which_test_governs(runs):
    """mid-p 0.0625 with a Tango CI that excludes 0: the row must not contradict itself."""
    base, cand = runs["b4c0"]
    (row,) = build_report(load_run(base), load_run(cand))["rows"]
    assert (row["baseline_only"], row["candidate_only"]) == (4, 0)
    assert row["mcnemar_midp"] == pytest.approx(0.0625) and row["diff_ci_high"] < 0
    assert row["verdict"] == "inconclusive"
    assert "the verdict follows the mid-p test" in row["verdict_text"]
    assert "asymptotic score test (p = 0.0455)" in row["verdict_text"]


def test_mde_not_resolvable_is_said_not_printed_as_a_number(runs, capsys):
    """1 / 1 discordant of 30: no difference is resolvable; the old report said 'MDE 6.67'."""
    base, cand = runs["partial"]
    rc, out, _ = _run(capsys, base, cand, "--allow-partial")
    assert "| none resolvable |" in out and "No difference is resolvable at n = 30" in out
    assert "Differences below" not in out
    (row,) = build_report(load_run(base), load_run(cand))["rows"]
    assert row["mde"] is None and row["mde_resolvable"] is False


def test_identical_small_rows_say_nothing_changed_but_n_is_too_small(runs):
    base, cand = runs["identical"]
    report = build_report(load_run(base), load_run(cand))
    assert report["outcome"] == "identical" and not report["rows"][0]["noninferior"]
    assert report["verdict"].startswith("The arms agree on every question of every row (0 discordant), but")
    assert "not shown for passkey em @ 4096" in report["verdict"]
