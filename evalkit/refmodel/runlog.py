"""The training run's clock and log (the bench harness's): each line stamped with the seconds since
the run started (the clock its `--minutes` budget counts on, imports included), echoed to a file
once the output folder exists."""

from __future__ import annotations

from pathlib import Path

from evalkit.bench.harness import Clock, Log

CLOCK = Clock()
log = Log(CLOCK)


def start_clock(t0: float) -> None:
    """Count from `t0` (the script's first line), not from this module's import."""
    CLOCK.t0 = t0


def started_at() -> float:
    return CLOCK.t0


def log_to(path: Path) -> None:
    """Append every later line to `path` too."""
    log.to_file(path)
