"""Short arm labels for the report's column heads.

An evalkit run names itself (`arm.label`, else `arm.state_dtype`). An lm-eval log does not: its
path is `OUTPUT/<model_name_sanitized>/samples_<task>_<datetime>.jsonl`, so the file name is long
and the model folder is the same for both arms. Rule: keep the run's own label when the two differ
and are short; otherwise name each arm by the first path component (from the left) where the two
paths differ, reading an lm-eval samples file as its folder; if that does not tell them apart
either, the run's own labels stay.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.store import RunData
from evalkit.store.lmeval import is_lmeval_samples_file

SHORT = 24  # characters: a label longer than this crowds the table's column heads


def _parts(path: str) -> tuple[str, ...]:
    p = Path(path)
    if is_lmeval_samples_file(p):
        p = p.parent
    return p.resolve().parts


def short_labels(baseline: RunData, candidate: RunData) -> tuple[str, str]:
    base, cand = baseline.label, candidate.label
    if base != cand and len(base) <= SHORT and len(cand) <= SHORT:
        return base, cand
    a, b = _parts(baseline.path), _parts(candidate.path)
    for x, y in zip(a, b):
        if x != y:
            return x, y
    return base, cand
