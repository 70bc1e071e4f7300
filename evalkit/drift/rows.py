"""A drift study's measured rows in the run store: one samples.jsonl line per finished (mode, prompt).

A study at 128k tokens with random 48B-dims weights needs about an hour of GPU time, more than one
lent session gets, so it must continue where it stopped, and its summary must be the one an
uninterrupted run writes: every figure is computed from these rows, kept exactly (NaN stays NaN,
JSON's extension; the CSV/JSON files for readers write it as empty or null). The lines go through
the store's `RunWriter` (`KIND`): its lock, identity check, torn-line repair and resume, as a
run's samples do. Studies written before this layout keep a whole-file `checkpoint.json`, read
here for a refit (`read`), never resumed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalkit.drift.rundir import _clean
from evalkit.drift.study_summary import ModeState
from evalkit.errors import InputError
from evalkit.store.jsonl import iter_jsonl, read_json
from evalkit.store.samples_file import has_samples, samples_path
from evalkit.store.schema import SampleError
from evalkit.store.writer import RowKind

ROWS = ("bucket_rows", "state_rows", "prompt_rows")
LEGACY = "checkpoint.json"  # before the run store layout: every mode's rows in one object


def _normalise(obj: Any) -> dict[str, Any]:
    """Check one line (SampleError naming the field) and return it with plain Python numbers."""
    if not isinstance(obj, dict):
        raise SampleError(f"a drift row is a JSON object, got {type(obj).__name__}")
    for name in ("mode", "prompt", "prompt_hash", "seconds", *ROWS):
        if name not in obj:
            raise SampleError(f"missing field {name!r}")
    p = obj["prompt"]
    if not isinstance(obj["mode"], str) or isinstance(p, bool) or not isinstance(p, int) or p < 0:
        raise SampleError(f"fields 'mode', 'prompt' must be a name and an index, got {obj['mode']!r}, {p!r}")
    if not all(isinstance(obj[k], list) for k in ROWS):
        raise SampleError(f"fields {', '.join(ROWS)} must be lists")
    if not isinstance(obj["seconds"], (int, float)) or not math.isfinite(obj["seconds"]):
        raise SampleError(f"field 'seconds' must be a number, got {obj['seconds']!r}")
    return _clean(obj, keep_nan=True)  # numpy scalars to numbers (the writer's JSON would quote them)


KIND = RowKind(_normalise, lambda row: (row["mode"], row["prompt"]))


def line(mode: str, prompt: int, prompt_hash: str, rows: tuple[list, list, list], seconds: float) -> dict:
    """One finished prompt of `mode`: its bucket, state and scalar rows and its wall seconds."""
    return {
        "mode": mode,
        "prompt": prompt,
        "prompt_hash": prompt_hash,
        **dict(zip(ROWS, rows)),
        "seconds": seconds,
    }


def has_rows(out: Path) -> bool:
    return has_samples(out) or (out / LEGACY).is_file()


def read(out: Path) -> tuple[dict[str, dict[str, list]], dict[int, str]]:
    """({mode: its rows and seconds, in the order measured}, {prompt: its token sha256}) of the study
    in `out`; InputError when it has none or they are damaged (a torn last line included)."""
    if not has_samples(out):
        return _read_legacy(out)
    modes: dict[str, dict[str, list]] = {}
    hashes: dict[int, str] = {}
    path = samples_path(out)
    for number, obj in iter_jsonl(path):
        try:
            row = _normalise(obj)
        except SampleError as exc:
            raise InputError(f"{path}:{number}: {exc}") from None
        mode = modes.setdefault(row["mode"], {k: [] for k in (*ROWS, "seconds")})
        for k in ROWS:
            mode[k] += row[k]
        mode["seconds"].append(row["seconds"])
        hashes[row["prompt"]] = row["prompt_hash"]
    return modes, hashes


def _read_legacy(out: Path) -> tuple[dict[str, dict[str, list]], dict[int, str]]:
    """A study written before the run store layout (the committed 128k studies)."""
    if not (out / LEGACY).is_file():
        raise InputError(
            f"{out} holds no samples.jsonl (nor an older {LEGACY}): not a drift study, or one "
            "older than --resume"
        )
    saved = read_json(out / LEGACY)
    if saved.get("version") != 1 or not isinstance(saved.get("modes"), dict):
        raise InputError(f"{out / LEGACY}: checkpoint version {saved.get('version')}, expected 1")
    return saved["modes"], dict(enumerate(saved.get("prompt_sha256") or []))


def restore(state: ModeState, saved: dict[str, list] | None) -> set[int]:
    """Fill `state` with a mode's saved rows; returns the prompts it finished."""
    if not saved:
        return set()
    for k in (*ROWS, "seconds"):
        setattr(state, k, list(saved[k]))
    return {r["prompt"] for r in state.prompt_rows}
