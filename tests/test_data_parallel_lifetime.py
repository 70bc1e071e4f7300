"""Data-parallel engine workers never outlive their parent (issue 43, security item 3): a parent
killed with SIGKILL or SIGTERM takes its workers with it, and Ctrl-C ends a run mid-batch without
waiting for the workers' batches. Real processes on the CPU; every wait polls with a generous bound.

The guard itself (`evalkit.backends.worker_lifetime`) is tried on a bare spawned worker (no model:
fast); `DataParallelBackend` with a real engine worker once per signal path (the rest `slow`).

The children get SIGINT's default action, as a terminal's foreground job does: a shell without job
control starts a background job (`pytest ... &`) with SIGINT ignored, an ignored signal stays ignored
across fork and exec, and a parent that ignores Ctrl-C looked like a data-parallel hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

BARE = """
import multiprocessing as mp, os, sys, time
from evalkit.backends.worker_lifetime import die_with_parent

def worker(parent_pid):
    die_with_parent(parent_pid)
    time.sleep(600)

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=worker, args=(os.getpid(),), daemon=True)
    p.start()
    print("workers", p.pid, flush=True)
    time.sleep(600)
"""

ENGINE = """
import sys, time
from evalkit.backends.base import GenRequest
from evalkit.backends.data_parallel import DataParallelBackend

backend = DataParallelBackend(sys.argv[1], ["cpu"], max_num_seqs=4)
print("workers", *[p.pid for p in backend._procs], flush=True)
if sys.argv[2] == "idle":
    time.sleep(600)
requests = [GenRequest([1, 2, 3, 4 + i % 50], max_new_tokens=64, ignore_eos=True) for i in range(20000)]
if sys.argv[2] == "interrupt-while-dealing":  # Ctrl-C just after a batch is in a worker's queue
    import multiprocessing.queues, os, signal

    put = multiprocessing.queues.Queue.put

    def put_then_ctrl_c(self, *args, **kwargs):
        multiprocessing.queues.Queue.put = put  # once
        put(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)

    multiprocessing.queues.Queue.put = put_then_ctrl_c
print("generating", flush=True)
try:  # as `evalkit run` does: the backend is closed however the run ends
    backend.generate(requests, lambda i, r: None)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
finally:
    backend.close()
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that may never come, in a container, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ignores_sigint(pid: int) -> bool:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return bool(int(status["SigIgn"], 16) & (1 << (signal.SIGINT - 1)))


def _wait_gone(pids: list[int], timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


@contextmanager
def _sigint_as_in_a_terminal():
    """Children started inside get SIGINT's default action even where this process ignores it (a
    background job of a shell without job control): a handler, unlike SIG_IGN, is reset by exec."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(script: str, *argv: str) -> tuple[subprocess.Popen, list[int]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVALKIT_CPU_THREADS": "1"}
    with _sigint_as_in_a_terminal():
        parent = subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # its own process group, as a shell gives a foreground job
        )
    line = parent.stdout.readline().split()
    assert line and line[0] == "workers", line
    return parent, [int(x) for x in line[1:]]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _killed_parent_takes_its_workers(parent: subprocess.Popen, workers: list[int], sig: int) -> None:
    try:
        assert workers and all(_alive(p) for p in workers)
        os.kill(parent.pid, sig)
        parent.wait(timeout=60)
        assert _wait_gone(workers) == [], "workers outlived their parent"
    finally:
        _cleanup([parent.pid, *workers])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_guarded_worker_dies_with_its_parent(sig):
    _killed_parent_takes_its_workers(*_start(BARE), sig)


@pytest.mark.slow
def test_an_engine_worker_dies_with_a_sigkilled_parent(tiny_hybrid_ckpt):
    _killed_parent_takes_its_workers(*_start(ENGINE, str(tiny_hybrid_ckpt), "idle"), signal.SIGKILL)


@pytest.mark.slow
def test_an_engine_worker_dies_with_a_terminated_parent(tiny_hybrid_ckpt):
    _killed_parent_takes_its_workers(*_start(ENGINE, str(tiny_hybrid_ckpt), "idle"), signal.SIGTERM)


def _interrupt_mid_batch(ckpt: Path, to_group: bool) -> None:
    parent, workers = _start(ENGINE, str(ckpt), "generate")
    try:
        assert parent.stdout.readline().strip() == "generating"
        time.sleep(0.5)  # the worker is mid-batch: 20,000 requests of 64 tokens take minutes
        t0 = time.monotonic()
        if to_group:
            os.killpg(parent.pid, signal.SIGINT)  # a terminal's Ctrl-C
        else:
            os.kill(parent.pid, signal.SIGINT)  # `kill -INT`: the worker never sees it
        out, _ = parent.communicate(timeout=120)
        waited = time.monotonic() - t0
        assert parent.returncode == 130 and "interrupted" in out
        assert _wait_gone(workers) == []
        # the batch is not awaited: before, the parent waited 30 s for a polite stop, then terminated
        assert waited < 25, f"Ctrl-C took {waited:.1f} s"
    finally:
        _cleanup([parent.pid, *workers])


def test_sigint_to_the_parent_ends_a_data_parallel_run_mid_batch(tiny_hybrid_ckpt):
    _interrupt_mid_batch(tiny_hybrid_ckpt, to_group=False)


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_ends_a_data_parallel_run_mid_batch(tiny_hybrid_ckpt):
    _interrupt_mid_batch(tiny_hybrid_ckpt, to_group=True)


def test_a_child_takes_ctrl_c_even_when_the_test_runner_ignores_it():
    """`pytest ... &` from a script: SIGINT is ignored here, and a child would inherit that (the
    SIGINT tests then waited 120 s for a parent that could not hear them)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        parent, workers = _start(BARE)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert not _ignores_sigint(parent.pid), "the child inherited an ignored SIGINT"
    finally:
        _cleanup([parent.pid, *workers])


def test_ctrl_c_while_the_requests_are_dealt_ends_the_run_at_once(tiny_hybrid_ckpt):
    """Before, a Ctrl-C while a batch was being put in a worker's queue escaped generate() before
    its stop, and close() then waited 30 s for a worker busy with 20,000 requests."""
    parent, workers = _start(ENGINE, str(tiny_hybrid_ckpt), "interrupt-while-dealing")
    try:
        t0 = time.monotonic()
        out, _ = parent.communicate(timeout=120)
        waited = time.monotonic() - t0
        assert parent.returncode == 130 and "interrupted" in out, out
        assert _wait_gone(workers) == []
        assert waited < 25, f"Ctrl-C while dealing took {waited:.1f} s"
    finally:
        _cleanup([parent.pid, *workers])


class _FakeWorker:
    """A worker as `stop_now` sees it: it ignores SIGTERM, and its first join is cut by a Ctrl-C."""

    def __init__(self, interrupted_join: bool = False) -> None:
        self.alive, self.calls, self.interrupted_join = True, [], interrupted_join

    def is_alive(self) -> bool:
        return self.alive

    def terminate(self) -> None:
        self.calls.append("terminate")

    def kill(self) -> None:
        self.calls.append("kill")
        self.alive = False

    def join(self, timeout: float | None = None) -> None:
        assert timeout is not None, "an unbounded wait in the stop"
        self.calls.append("join")
        if self.interrupted_join:
            self.interrupted_join = False
            raise KeyboardInterrupt


def test_a_second_ctrl_c_during_the_stop_kills_every_worker_at_once():
    from evalkit.backends.data_parallel import DataParallelBackend

    backend = object.__new__(DataParallelBackend)  # the stop alone, no engine
    workers = [_FakeWorker(interrupted_join=True), _FakeWorker()]
    backend._procs = list(workers)
    with pytest.raises(KeyboardInterrupt):
        backend.stop_now()
    assert [w.alive for w in workers] == [False, False], [w.calls for w in workers]
    assert backend._procs == []
