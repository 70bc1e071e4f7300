"""A worker process that never outlives its parent.

An engine worker holds a model in memory; if the parent dies without closing it (SIGTERM, kill -9,
`timeout`), the worker would sit idle on its queue forever. Two guards, in the worker:
- on Linux, `prctl(PR_SET_PDEATHSIG, SIGKILL)`: the kernel kills the worker the moment its parent
  exits, however it exits;
- everywhere, a daemon thread that polls the parent pid and ends the worker when it changes (the
  parent is gone and the worker was re-parented).
The worker also ignores SIGINT: a terminal's Ctrl-C goes to the whole process group, and the
parent alone decides how the run stops (it then ends its workers at once).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_POLL_S = 0.5


def _kill_on_parent_death() -> bool:
    """Ask the Linux kernel to SIGKILL this process when its parent exits; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int, poll_s: float) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # the parent is gone: no cleanup worth waiting for, the parent owns the run
        time.sleep(poll_s)


def die_with_parent(parent_pid: int, poll_s: float = PARENT_POLL_S) -> None:
    """Call first thing in a worker process: it ends when `parent_pid` does, and ignores Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _kill_on_parent_death()
    if os.getppid() != parent_pid:  # the parent died before the guard was set
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent_pid, poll_s), daemon=True, name="parent-watch"
    ).start()
