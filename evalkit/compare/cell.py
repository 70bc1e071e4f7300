"""A compare cell (one task x metric x length of a paired report) as a frozen, typed result.

The report's rows are dicts (its JSON, and the input of the gate and the plan); this type is where
a row is made (`evalkit.compare.rows.compute_row` builds one and hands out its `to_dict()`), so the
fields, their types and their names have one definition, and the renderers (Markdown, brief,
terminal, plots) read a row's attributes through `cells_of`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

# set by the report once the cell is judged (`verdict.row_verdict`); a row without them has none yet
_JUDGED = ("verdict", "verdict_text")


@dataclasses.dataclass(frozen=True)
class CompareCell:
    task: str
    metric: str
    length: int | None
    n: int
    acc_baseline: float
    acc_candidate: float
    stderr_baseline: float | None
    stderr_candidate: float | None
    wilson_baseline: tuple[float, float]
    wilson_candidate: tuple[float, float]
    both_right: int
    both_wrong: int
    baseline_only: int  # questions only the baseline got right
    candidate_only: int
    discordance: float  # (baseline_only + candidate_only) / n
    mcnemar_midp: float
    mcnemar_exact_p: float
    mcnemar_asymptotic_p: float
    mcnemar_midp_holm: float | None  # set across the report's rows (`rows.add_holm`)
    diff: float  # candidate - baseline, Tango score CI below
    diff_ci_low: float
    diff_ci_high: float
    margin: float
    noninferiority_z: float | None
    noninferiority_p: float
    noninferior: bool
    mde: float | None
    mde_resolvable: bool
    baseline_only_ids: tuple[Any, ...]
    candidate_only_ids: tuple[Any, ...]
    notes: tuple[str, ...]
    # samples flagged "overflow" (the state reached the arm's format max or went non-finite,
    # `evalkit.engine.health`): said apart from wrong answers; 0 in reports written before
    overflow_baseline: int = 0
    overflow_candidate: int = 0
    verdict: str | None = None  # a `verdict.VERDICTS` value
    verdict_text: str | None = None  # the verdict in words

    def to_dict(self) -> dict[str, Any]:
        """The JSON row: sequences as lists, in field order; the verdict only once judged."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _JUDGED and value is None:
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> CompareCell:
        """A row of a report (or its JSON); keys a later report adds beside the cell's are ignored."""
        values = {}
        for f in dataclasses.fields(cls):
            value = row[f.name] if f.default is dataclasses.MISSING or f.name in row else f.default
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


def cells_of(rows: Iterable[dict[str, Any] | CompareCell]) -> list[CompareCell]:
    """The typed cells of a report's rows (cells pass through), for the readers of attributes."""
    return [r if isinstance(r, CompareCell) else CompareCell.from_dict(r) for r in rows]
