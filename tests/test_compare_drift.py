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
    section = out.stdout[drift_at:]
    # each arm's KL growth is the weighted log-log fit of the committed decode buckets; the oracle
    # is statsmodels' WLS on the buckets the fit uses (from position 510, >= 2 tokens, mean > 0;
    # weight 1 / var(log mean), floored at the smallest positive variance)
    for arm in ("fp16", "bf16"):
        slope, (lo, hi) = _wls_growth(arm)
        line = next(s for s in section.splitlines() if s.startswith(f"- **{arm}**"))
        want = f"KL(fp32‖arm) grows ∝ L^{slope:.2f} from 512 to 63.8k (95% CI {lo:.2f} to {hi:.2f})"
        assert want in line, (want, line)


def _wls_growth(arm: str) -> tuple[float, tuple[float, float]]:
    import csv

    import numpy as np
    import statsmodels.api as sm

    with open(DRIFT / "buckets.csv") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if (r["mode"], r["arm"], r["metric"]) == ("decode", arm, "kl")
            and float(r["position"]) >= 510
            and int(r["n"]) >= 2
            and float(r["mean"]) > 0
        ]
    mean = np.array([float(r["mean"]) for r in rows])
    var = np.array([float(r["std"]) ** 2 / int(r["n"]) for r in rows]) / mean**2
    var = np.maximum(var, var[var > 0].min())
    x = sm.add_constant(np.log([float(r["position"]) for r in rows]))
    fit = sm.WLS(np.log(mean), x, weights=1 / var).fit()
    lo, hi = fit.conf_int()[1]
    return float(fit.params[1]), (float(lo), float(hi))


def test_json_report_carries_the_drift_brief():
    out = _compare("--format", "json", "--drift", str(DRIFT))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["drift"]) == 1 and report["rows"]


def test_a_directory_that_is_not_a_drift_run_is_refused_in_one_line():
    out = _compare("--drift", str(RUNS))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "not an `evalkit drift` run" in out.stderr
