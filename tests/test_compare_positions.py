"""Item accuracy by answer position, paired between two runs (evalkit.compare.positions)."""

from __future__ import annotations

import math

import pytest

from evalkit.compare.positions import position_differences, position_report
from evalkit.stats import clustered_se


def _sample(doc_id, flags, task="copy_list_long", length=2048, error=None):
    return {"task": task, "doc_id": doc_id, "length": length, "item_correct": flags, "error": error}


def test_late_positions_lose_and_early_ones_do_not():
    base = [_sample(i, [True] * 8) for i in range(10)]
    # candidate: every answer right on positions 0-3, wrong on 6-7 in 6 of 10 answers
    cand = [_sample(i, [True] * 6 + ([False, False] if i < 6 else [True, True])) for i in range(10)]
    rows = position_differences(base, cand, bucket=4)
    assert [(r.first, r.last) for r in rows] == [(0, 3), (4, 7)]
    early, late = rows
    assert early.difference == 0 and early.n_items == 40 and early.n_questions == 10
    assert late.base_accuracy == 1.0 and late.cand_accuracy == pytest.approx(28 / 40)
    assert late.difference == pytest.approx(-12 / 40)
    # items of one answer move together: the SE is Miller's clustered one, by question
    diffs = [(-1.0 if (i < 6 and p >= 6) else 0.0) for i in range(10) for p in range(4, 8)]
    se = clustered_se(diffs, [i for i in range(10) for _ in range(4)]).se_clustered
    assert late.se_clustered == pytest.approx(se)
    assert late.ci_high < 0  # a significant loss at the end of the answer
    assert late.ci_low == pytest.approx(late.difference - 1.959964 * se, rel=1e-5)


def test_pairs_only_questions_scored_in_both_runs():
    base = [_sample(0, [True, True]), _sample(1, [False, True]), _sample(2, [True, True], length=4096)]
    cand = [
        _sample(0, [True, False]),
        _sample(1, [True, True], error="timeout"),  # errors and unmatched questions are left out
        _sample(3, [False, False]),
        _sample(2, [False, False], length=4096),
        _sample(0, [False, False], task="register"),
    ]
    (row,) = position_differences(base, cand, task="copy_list_long", length=2048, bucket=8)
    assert row.n_questions == 1 and row.n_items == 2
    assert row.difference == pytest.approx(-0.5)
    assert math.isfinite(row.se_clustered)
    with pytest.raises(ValueError):
        position_differences(base, cand, bucket=0)


def test_report_covers_every_task_and_length_with_item_flags():
    base = [_sample(0, [True, True]), _sample(0, [True], task="register", length=1024)]
    base.append({"task": "passkey", "doc_id": 0, "length": 4096, "error": None})  # no item flags
    cand = [_sample(0, [True, False]), _sample(0, [False], task="register", length=1024)]
    report = position_report(base, cand, bucket=1)
    assert set(report) == {"copy_list_long", "register"}
    assert [r["difference"] for r in report["copy_list_long"]["2048"]] == [0.0, -1.0]
    assert report["register"]["1024"][0]["cand_accuracy"] == 0.0
