"""The compare cell's typed form (evalkit.compare.cell): a report row is made as a CompareCell and
handed out as its dict, so the committed report's rows (written before the type existed) read
back into it field for field, and the report built now from the same runs gives the same cells."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evalkit.compare.cell import CompareCell

EXAMPLE = Path(__file__).resolve().parents[1] / "results" / "compare-example"


def _committed_rows() -> list[dict]:
    return json.loads((EXAMPLE / "report.json").read_text())["rows"]


def test_the_committed_reports_rows_read_back_into_cells():
    rows = _committed_rows()
    assert len(rows) == 2
    for row in rows:
        cell = CompareCell.from_dict(row)
        assert cell.baseline_only == 21 and cell.candidate_only == 18 and cell.n == 1319
        # the cell's fields are the row's keys, the verdict the report judged included
        assert cell.to_dict() == row and cell.verdict == row["verdict"]
        unjudged = dataclasses.replace(cell, verdict=None, verdict_text=None).to_dict()
        assert unjudged == {k: v for k, v in row.items() if k not in ("verdict", "verdict_text")}


def test_a_report_built_now_gives_the_committed_cells():
    from evalkit.compare import build_report, render_json
    from evalkit.store import load_run

    report = build_report(load_run(EXAMPLE / "fp32"), load_run(EXAMPLE / "fp16"))
    now = [CompareCell.from_dict(r) for r in json.loads(render_json(report))["rows"]]
    assert now == [CompareCell.from_dict(r) for r in _committed_rows()]


def test_a_cell_is_frozen_and_a_row_without_a_field_is_refused():
    cell = CompareCell.from_dict(_committed_rows()[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.n = 1  # type: ignore[misc]
    row = dict(_committed_rows()[0])
    del row["mcnemar_midp"]
    with pytest.raises(KeyError, match="mcnemar_midp"):
        CompareCell.from_dict(row)
