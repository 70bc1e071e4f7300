"""Every committed drift study still loads, and reports the numbers its stored data gives.

The report code is the oracle twice over: `summary.md` must be what the report renders from the
run directory today, and a study with a checkpoint must summarise, from its per-prompt rows
alone, to the figures its `summary.json` holds (the growth fits to 1e-9: a Poisson fit's last
digits move with the optimiser's platform).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from evalkit.drift.refit import refitted
from evalkit.drift.report import drift_markdown
from evalkit.drift.result import DriftSummary
from evalkit.drift.rundir import load_run
from evalkit.drift.study_report import study_markdown

RESULTS = Path(__file__).resolve().parents[1] / "results" / "drift"
RUNS = sorted(
    p.parent for p in RESULTS.rglob("summary.json") if json.loads(p.read_text()).get("kind") == "drift"
)
STUDIES = [d for d in RUNS if "study" in json.loads((d / "summary.json").read_text())]
CHECKPOINTED = [d for d in STUDIES if (d / "checkpoint.json").is_file()]


def _ids(dirs: list[Path]) -> list[str]:
    return [str(d.relative_to(RESULTS)) for d in dirs]


def assert_same_numbers(got, want, where: str = "") -> None:
    """Equal structure and values; floats to a relative 1e-9."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, set(got) ^ set(want))
        for k in want:
            assert_same_numbers(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_numbers(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and isinstance(got, (int, float)):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-300), (where, got, want)
    else:
        assert got == want, (where, got, want)


def _json(obj):
    """As summary.json stores it (NaN written as null)."""
    from evalkit.drift.rundir import _clean

    return json.loads(json.dumps(_clean(obj)))


def test_the_committed_drift_runs_are_found():
    assert len(RUNS) >= 13 and len(STUDIES) >= 6 and len(CHECKPOINTED) >= 4


@pytest.mark.parametrize("run", RUNS, ids=_ids(RUNS))
def test_summary_md_is_what_the_report_renders_from_the_stored_run(run):
    assert drift_markdown(run) == (run / "summary.md").read_text()


@pytest.mark.parametrize("run", STUDIES, ids=_ids(STUDIES))
def test_a_stored_study_summary_loads_typed_and_writes_back_unchanged(run):
    stored = json.loads((run / "summary.json").read_text())
    typed = DriftSummary.from_dict(stored)
    assert typed.to_dict() == stored
    for mode, st in typed.study.items():
        for arm, a in st.arms.items():
            assert a.mean_kl.mean == stored["study"][mode]["arms"][arm]["mean_kl"]["mean"]


@pytest.mark.parametrize("run", CHECKPOINTED, ids=_ids(CHECKPOINTED))
def test_a_checkpointed_study_summarises_from_its_rows_to_its_stored_numbers(run):
    stored = json.loads((run / "summary.json").read_text())
    summary, _, _ = refitted(run)
    assert_same_numbers(_json(summary["study"]), stored["study"])
    assert summary["verdicts"] == stored["verdicts"]
    rendered = study_markdown({**load_run(run), "summary": _json(summary)})
    assert rendered == (run / "summary.md").read_text()


def test_the_comparison_fails_when_one_measured_row_changes(tmp_path):
    """A study whose checkpoint lost or changed one bucket mean no longer matches its summary."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(CHECKPOINTED[0], run)
    ck = json.loads((run / "checkpoint.json").read_text())
    rows = ck["modes"]["prefill"]["bucket_rows"]
    (i,) = [
        j
        for j, r in enumerate(rows)
        if r["prompt"] == 0
        and r["arm"] == "fp16"
        and r["metric"] == "kl"
        and r["bucket"] == rows[-1]["bucket"]
    ]
    rows[i] = {**rows[i], "mean": rows[i]["mean"] * 1.5}
    (run / "checkpoint.json").write_text(json.dumps(ck))
    stored = json.loads((run / "summary.json").read_text())
    summary, _, _ = refitted(run)
    with pytest.raises(AssertionError):
        assert_same_numbers(_json(summary["study"]), stored["study"])


def test_the_report_fails_when_a_stored_figure_changes():
    """summary.md carries the stored figures: a different mean KL renders a different report."""
    run = CHECKPOINTED[0]
    stored = json.loads((run / "summary.json").read_text())
    changed = copy.deepcopy(stored)
    arm = changed["study"]["prefill"]["arms"]["fp16"]
    arm["mean_kl"]["mean"] *= 2
    same = study_markdown({**load_run(run), "summary": stored})
    assert same == (run / "summary.md").read_text()
    assert study_markdown({**load_run(run), "summary": changed}) != same


def test_an_old_study_is_refit_in_place_and_refused_a_resume(tmp_path):
    """A study from before the run store layout (checkpoint.json): `--report-only` rewrites its
    files to the numbers it reported, the rows untouched; `--resume` is refused in one line (its
    rows are not a samples.jsonl the run store's writer could append to)."""
    import shutil

    from test_drift_driver import TOY

    from evalkit.drift.prompts import random_prompts
    from evalkit.drift.refit import refit_study
    from evalkit.drift.study import StudyConfig, run_study
    from evalkit.errors import InputError

    run = tmp_path / "run"
    shutil.copytree(CHECKPOINTED[0], run)
    rows = (run / "checkpoint.json").read_bytes()
    summary = refit_study(run, plots=False)
    assert (run / "checkpoint.json").read_bytes() == rows and not (run / "samples.jsonl").exists()
    stored = json.loads((CHECKPOINTED[0] / "summary.json").read_text())
    assert_same_numbers(_json(summary["study"]), stored["study"])
    assert (run / "summary.md").read_text() == (CHECKPOINTED[0] / "summary.md").read_text()
    prompts = random_prompts(TOY.vocab_size, 64, 1, seed=0)
    with pytest.raises(InputError, match=r"before the run store layout \(checkpoint\.json\).*--report-only"):
        run_study(TOY, prompts, StudyConfig(arms=["fp16"], modes=["decode"]), run, resume=True)
