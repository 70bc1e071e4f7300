"""The training run's log: each line stamped with the seconds since the run started (the clock its
`--minutes` budget counts on, imports included), echoed to a file once the output folder exists."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

_started_at = time.time()
_file: TextIO | None = None


def start_clock(t0: float) -> None:
    """Count from `t0` (the script's first line), not from this module's import."""
    global _started_at
    _started_at = t0


def started_at() -> float:
    return _started_at


def log_to(path: Path) -> None:
    """Append every later line to `path` too."""
    global _file
    _file = open(path, "a")  # noqa: SIM115 - open for the rest of the run


def log(msg: str) -> None:
    line = f"[{time.time() - _started_at:7.1f}s] {msg}"
    print(line, flush=True)
    if _file is not None:
        _file.write(line + "\n")
        _file.flush()
