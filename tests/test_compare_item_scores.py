"""issue 38: the per-question paired test of item-fraction scores, on planted runs (scipy's Wilcoxon
as the oracle): exact match reads "identical" while items were lost."""

import json

import numpy as np
import pytest
from scipy import stats

from evalkit.cli import main
from tests.helpers.runs import write_run


def _runs(tmp_path, lost_items):
    """40 questions of 40 items each, all wrong by exact match (the baseline gets 30/40 items);
    the candidate loses `lost_items[doc]` items on question doc."""
    outcomes = {("kv", doc, 2048): False for doc in range(40)}
    base = write_run(
        tmp_path / "base", "base", outcomes, extra=lambda t, doc, length: {"score": {"em": 30 / 40}}
    )
    cand = write_run(
        tmp_path / "cand",
        "cand",
        outcomes,
        extra=lambda t, doc, length: {"score": {"em": (30 - lost_items[doc]) / 40}},
    )
    return base, cand


def test_lost_items_are_tested_per_question_while_exact_match_reads_identical(tmp_path, capsys):
    lost = [2 if doc % 3 == 0 else 0 for doc in range(40)]
    lost[5] = -1  # one question gains an item
    base, cand = _runs(tmp_path, lost)
    assert main(["compare", str(base), str(cand), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"][0]["verdict"] == "identical"
    (cell,) = report["item_scores"]
    d = -np.array(lost) / 40
    assert cell["questions_changed"] == 15 and cell["mean_diff"] == pytest.approx(d.mean())
    assert cell["wilcoxon_pvalue"] == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-9)
    assert cell["wilcoxon_pvalue"] < 0.01
    main(["compare", str(base), str(cand)])
    assert "**Item-fraction scores**" in capsys.readouterr().out


def test_binary_scores_get_no_item_table(tmp_path, capsys):
    outcomes = {("kv", doc, None): doc % 2 == 0 for doc in range(10)}
    base = write_run(
        tmp_path / "b", "b", outcomes, extra=lambda t, d, n: {"score": {"em": float(d % 2 == 0)}}
    )
    cand = write_run(
        tmp_path / "c", "c", outcomes, extra=lambda t, d, n: {"score": {"em": float(d % 2 == 0)}}
    )
    main(["compare", str(base), str(cand), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["item_scores"] == []
