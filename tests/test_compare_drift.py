"""`evalkit compare --drift`: the paired report carries an `evalkit drift` run's summary."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "compare-example"
DRIFT = REPO / "results" / "drift" / "h200" / "runs" / "ref"


def _compare(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "compare", str(RUNS / "fp32"), str(RUNS / "fp16"), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_markdown_report_appends_the_drift_section():
    out = _compare("--drift", str(DRIFT))
    assert out.returncode == 0, out.stderr
    table_end = out.stdout.index("**Verdict:**")
    drift_at = out.stdout.index("Teacher-forced, decode")
    assert drift_at > table_end  # after the paired table
    assert "grows ∝ L^" in out.stdout[drift_at:]  # the growth verdicts of the committed H200 run


def test_json_report_carries_the_drift_brief():
    out = _compare("--format", "json", "--drift", str(DRIFT))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["drift"]) == 1 and report["rows"]


def test_a_directory_that_is_not_a_drift_run_is_refused_in_one_line():
    out = _compare("--drift", str(RUNS))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "not an `evalkit drift` run" in out.stderr
