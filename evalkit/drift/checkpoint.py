"""Resuming a drift study: the per-prompt rows every mode has measured, kept exactly.

A study at 128k tokens with random 48B-dims weights needs about an hour of GPU time, more than
one lent session or one killed job gets, so a study must continue where it stopped: the prompts
a mode finished are not run again, and the summary of the resumed study is the one an
uninterrupted run would have written. The CSV/JSON files of the run directory are for readers
(NaN becomes empty or null there); `checkpoint.json` keeps the rows as Python floats with NaN
intact (JSON's NaN extension), which is what makes the resumed summary equal.

A checkpoint is only taken up by a study of the same configuration, model and prompts (by each
finished prompt's token hash): anything else is a user error, not a silent mix."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.drift.study_summary import ModeState
from evalkit.errors import InputError

NAME = "checkpoint.json"
VERSION = 1


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


def save(out: Path, ident: Identity, states: dict[str, ModeState]) -> None:
    """Write every mode's rows and per-prompt seconds (atomically: a kill leaves the last one)."""
    body = {
        "version": VERSION,
        **ident.as_json(),
        "modes": {
            m: {
                "bucket_rows": s.bucket_rows,
                "state_rows": s.state_rows,
                "prompt_rows": s.prompt_rows,
                "seconds": s.seconds,
            }
            for m, s in states.items()
        },
    }
    tmp = out / (NAME + ".tmp")
    with open(tmp, "w") as f:
        json.dump(body, f, default=_plain, allow_nan=True)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(out / NAME)


def load(out: Path, ident: Identity) -> dict[str, dict[str, Any]]:
    """{mode: its saved rows} of the checkpoint in `out` ({} when there is none); raises
    InputError when it was written by another configuration, model or set of prompts."""
    path = out / NAME
    if not path.is_file():
        if (out / "summary.json").is_file():
            raise InputError(f"{out} holds a drift run without a checkpoint (older than --resume)")
        return {}
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
    """The checkpoint in `out` as saved (identity and every mode's rows); InputError if absent or
    of another version."""
    path = out / NAME
    if not path.is_file():
        raise InputError(f"{out} holds no {NAME}: not a drift study, or one older than --resume")
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read ({exc}); restore it from the run's copy") from None
    if saved.get("version") != VERSION:
        raise InputError(f"{path}: checkpoint version {saved.get('version')}, expected {VERSION}")
    return saved


def restore(state: ModeState, saved: dict[str, Any] | None) -> set[int]:
    """Fill `state` with a mode's saved rows; returns the prompts it finished."""
    if not saved:
        return set()
    state.bucket_rows = saved["bucket_rows"]
    state.state_rows = saved["state_rows"]
    state.prompt_rows = saved["prompt_rows"]
    state.seconds = saved["seconds"]
    return {r["prompt"] for r in state.prompt_rows}
