"""issue 19: the comment-sized --brief report (size cap on a 200-row report), $GITHUB_STEP_SUMMARY,
the forest plot (PNG, `--plot DIR`) and its text fallback."""

import pytest

from evalkit.cli import main
from evalkit.compare import build_report, render_brief, render_markdown
from evalkit.compare.forest import text_forest
from evalkit.store import load_run
from tests.helpers.runs import write_cells

LENGTHS = (1024, 2048, 4096, 8192)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """200 rows (50 tasks x 4 lengths), most inconclusive, two losses, every row with discordant ids."""
    cells = {}
    for t in range(50):
        for i, length in enumerate(LENGTHS):
            cells[(f"task_with_a_long_name_{t:02d}", length)] = (
                (30, 2, 120) if t < 2 and i == 3 else (6, 5, 120)
            )
    base, cand = write_cells(tmp_path_factory.mktemp("big"), cells)
    return base, cand, build_report(load_run(base), load_run(cand), fail_on="loss")


def test_full_report_of_200_rows_is_too_big_for_a_comment(big):
    assert len(big[2]["rows"]) == 200
    assert len(render_markdown(big[2])) > 65_536


@pytest.mark.parametrize("cap", [60_000, 20_000, 5_000])
def test_brief_stays_under_the_cap_and_leads_with_the_verdict(big, cap):
    report = big[2]
    text = render_brief(report, cap)
    assert len(text) <= cap
    head = text[:1500]
    assert "Gate `--fail-on loss`: **FAIL** on 2 row(s)" in head and "**Verdict:** Candidate is WORSE" in head
    # the losses come first in the table of rows that matter
    first_rows = [line for line in text.splitlines() if line.startswith("| task_")][:2]
    assert all("**loss**" in line for line in first_rows)
    if cap < 60_000:
        assert "Left out to stay under" in text


def test_brief_60k_keeps_table_forest_and_detail(big):
    text = render_brief(big[2], 60_000)
    assert "```text" in text and "<details><summary>" in text
    assert "200 of 200 rows matter" in text


def test_step_summary_is_appended(big, tmp_path, monkeypatch, capsys):
    base, cand, _ = big
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rc = main(["compare", str(base), str(cand), "--format", "json", "--max-chars", "30000"])
    capsys.readouterr()
    text = summary.read_text()
    assert rc == 0 and text.startswith("earlier step\n### evalkit compare")
    assert len(text) <= 30_000 + len("earlier step\n")


def test_plot_dir_writes_inside_the_dir(tmp_path, capsys):
    base, cand = write_cells(
        tmp_path / "runs", {("a", 1024): (3, 1, 50), ("a", 2048): (0, 0, 50), ("b", None): (2, 2, 9)}
    )
    rc = main(["compare", str(base), str(cand), "--plot", str(tmp_path / "plots"), "--format", "json"])
    capsys.readouterr()
    assert rc == 0 and not (tmp_path / "plots.png").exists()
    for name in ("forest.png", "accuracy.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"
    file = tmp_path / "f.png"
    assert main(["compare", str(base), str(cand), "--plot", str(file), "--format", "json"]) == 0
    capsys.readouterr()
    assert file.read_bytes()[:4] == b"\x89PNG"


def test_text_forest_marks_estimate_ci_zero_and_margin(big):
    # a report's row (every cell field) with the plotted ones set
    plotted = {"task": "t", "metric": "m", "length": None, "diff": -0.02, "diff_ci_low": -0.04}
    rows = [{**big[2]["rows"][0], **plotted, "diff_ci_high": 0.01, "margin": 0.03, "verdict": "inconclusive"}]
    header, line, legend = text_forest(rows)
    axis = line[3 : 3 + 41]
    assert axis.index("[") < axis.index("*") < axis.index("|") < axis.index("]")
    assert axis.index("[") < axis.index(":") < axis.index("*")  # -3 pp lies inside [-4, +1]
    assert "-2.00 [-4.00, +1.00] inconclusive" in line and "−δ" in legend
