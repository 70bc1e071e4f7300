"""Resuming a drift study: the per-prompt rows every mode has measured, kept exactly.

A study at 128k tokens with random 48B-dims weights needs about an hour of GPU time, more than
one lent session or one killed job gets, so a study must continue where it stopped: the prompts
a mode finished are not run again, and the summary of the resumed study is the one an
uninterrupted run would have written. The CSV/JSON files of the run directory are for readers
(NaN becomes empty or null there); the checkpoint keeps the rows as Python floats with NaN
intact (JSON's NaN extension), which is what makes the resumed summary equal.

The run store's resume semantics (`evalkit.store.writer`): `checkpoint.jsonl` is append-only,
one line per finished prompt of a mode, flushed and fsynced before the next prompt starts; a
line torn by a kill is dropped when the study resumes (`store.jsonl.repair_torn_tail`) and
refused by a reader. Its first line, and one more per resume, is the study's identity: a
checkpoint is only taken up by a study of the same configuration, model and prompts (by each
finished prompt's token hash); anything else is a user error, not a silent mix. Studies written
before this format keep their whole-file `checkpoint.json` (`read` loads either; a resume
carries it over into the log).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.drift.study_summary import ModeState
from evalkit.errors import InputError
from evalkit.store.jsonl import iter_jsonl, repair_torn_tail
from evalkit.store.writer import open_no_follow

NAME = "checkpoint.jsonl"
LEGACY = "checkpoint.json"  # version 1: every mode's rows in one object, rewritten after each prompt
VERSION = 2
ROWS = ("bucket_rows", "state_rows", "prompt_rows")


@dataclass
class Identity:
    """What a resumed study must share with the one that wrote the checkpoint."""

    config: dict[str, Any]
    model: dict[str, Any]
    prompt_sha256: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"config": self.config, "model": self.model, "prompt_sha256": self.prompt_sha256}


def _plain(x: Any) -> Any:
    """numpy scalars to Python numbers, so json can write them (NaN stays NaN)."""
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, default=_plain, allow_nan=True) + "\n").encode()


def begin(out: Path, ident: Identity, saved: dict[str, dict[str, Any]], resume: bool) -> None:
    """Make `out` ready for `append`: a resumed log gets the identity again (the prompts may have
    grown); otherwise a new log holds the identity and `saved` (an older checkpoint.json's rows)."""
    head = {"version": VERSION, **ident.as_json()}
    if resume and (out / NAME).is_file():
        repair_torn_tail(out / NAME)
        _append(out, head)
        return
    tmp = out / f".{NAME}.tmp"
    with open(tmp, "wb") as f:
        f.write(_line(head) + b"".join(_line({"mode": m, **rows}) for m, rows in saved.items()))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(out / NAME)
    if (out / LEGACY).is_file():  # carried over: one checkpoint per run directory
        (out / LEGACY).unlink()


def append(out: Path, mode: str, rows: tuple[list, list, list], seconds: float) -> None:
    """One finished prompt of `mode`: its bucket, state and scalar rows and its wall seconds."""
    _append(out, {"mode": mode, **dict(zip(ROWS, rows)), "seconds": [seconds]})


def _append(out: Path, obj: dict[str, Any]) -> None:
    fd = open_no_follow(out / NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, _line(obj))
        os.fsync(fd)
    finally:
        os.close(fd)


def load(out: Path, ident: Identity) -> dict[str, dict[str, Any]]:
    """{mode: its saved rows} of the checkpoint in `out` ({} when there is none); raises
    InputError when it was written by another configuration, model or set of prompts."""
    if not (out / NAME).is_file() and not (out / LEGACY).is_file():
        if (out / "summary.json").is_file():
            raise InputError(f"{out} holds a drift run without a checkpoint (older than --resume)")
        return {}
    repair_torn_tail(out / NAME)  # a resume drops a line torn by a kill, as the run store does
    saved = read(out)
    for key in ("config", "model"):
        if json.loads(json.dumps(getattr(ident, key), default=_plain)) != saved[key]:
            raise InputError(f"{out}: the run there has another {key}; resume with the same options")
    done = {r["prompt"] for mode in saved["modes"].values() for r in mode["prompt_rows"]}
    theirs, ours = saved["prompt_sha256"], ident.prompt_sha256
    if any(i >= len(ours) or i >= len(theirs) or theirs[i] != ours[i] for i in done):
        raise InputError(f"{out}: the prompts differ from the run there; resume with the same prompts")
    return saved["modes"]


def read(out: Path) -> dict[str, Any]:
    """The checkpoint in `out`: its identity (the latest) and every mode's rows, in the order they
    were measured; InputError if absent, damaged or of another version."""
    if (out / NAME).is_file():
        saved: dict[str, Any] = {"modes": {}}
        for number, obj in iter_jsonl(out / NAME):
            if "mode" not in obj:
                if obj.get("version") != VERSION:
                    raise InputError(
                        f"{out / NAME}:{number}: version {obj.get('version')}, expected {VERSION}"
                    )
                saved.update(obj)
                continue
            mode = saved["modes"].setdefault(obj["mode"], {k: [] for k in (*ROWS, "seconds")})
            for k in (*ROWS, "seconds"):
                mode[k] += obj[k]
        if "config" not in saved:
            raise InputError(f"{out / NAME} has no identity line; restore it from the run's copy")
        return saved
    return _read_legacy(out)


def _read_legacy(out: Path) -> dict[str, Any]:
    """A version-1 checkpoint.json (the committed studies' format)."""
    path = out / LEGACY
    if not path.is_file():
        raise InputError(
            f"{out} holds no {NAME} (nor an older {LEGACY}): not a drift study, or one older than --resume"
        )
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read ({exc}); restore it from the run's copy") from None
    if saved.get("version") != 1:
        raise InputError(f"{path}: checkpoint version {saved.get('version')}, expected 1")
    return saved


def restore(state: ModeState, saved: dict[str, Any] | None) -> set[int]:
    """Fill `state` with a mode's saved rows; returns the prompts it finished."""
    if not saved:
        return set()
    state.bucket_rows = list(saved["bucket_rows"])
    state.state_rows = list(saved["state_rows"])
    state.prompt_rows = list(saved["prompt_rows"])
    state.seconds = list(saved["seconds"])
    return {r["prompt"] for r in state.prompt_rows}
