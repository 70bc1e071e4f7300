"""Files a user names (a --config or --plan, a drift --input, a checkpoint's config.json, a run's
records) are read only when they are regular files: reading a FIFO blocks until someone writes to
it, and a link to /dev/zero reads without end, where the user needs one line saying what is
wrong."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evalkit.errors import InputError


def why_unreadable(path: str | Path) -> str | None:
    """None for a regular file (links followed); else why it is not one, in a few words."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, socket or device)"
    return None


def regular_file(path: str | Path, what: str = "") -> Path:
    """`path` if it is a regular file; InputError naming it (after `what`) otherwise."""
    reason = why_unreadable(path)
    if reason is not None:
        raise InputError(f"{f'{what} ' if what else ''}{path}: {reason}")
    return Path(path).expanduser()
