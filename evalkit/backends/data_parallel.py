"""Data parallelism: one engine per device, each in its own process, the questions sharded among them.

One process per device keeps each engine's CUDA context, allocator and CUDA graphs its own (and the
GIL out of the way); a worker sees only its GPU (CUDA_VISIBLE_DEVICES), as cuda:0. Every result
comes back to the parent through one queue, and the parent hands it to `on_result`, so the run
directory keeps its single writer and samples are stored the moment any engine finishes them. The
engine is batch-invariant (a sequence's numerics do not depend on the batch around it), so a
sharded run gives the same samples as one device.

Requests are dealt round-robin in plan order (the plan groups a task's lengths together, so every
engine gets a like share of long and short prompts)."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from typing import Any

from evalkit.backends.base import GenRequest, OnResult
from evalkit.backends.worker_lifetime import die_with_parent
from evalkit.errors import InputError

POLL_S = 1.0  # how often the parent checks that its workers are alive while it waits
STOP_GRACE_S = 2.0  # an interrupted run's workers get this long after SIGTERM before SIGKILL
START_TIMEOUT_S = 3600.0  # loading a large checkpoint takes minutes; a hung start must not hang forever
# engine processes of one run: each holds two queues' pipes and locks, and a million of them ran the
# parent out of file descriptors (more than one per core or GPU only slows a run anyway)
MAX_ENGINES = 128


AUTO = "auto"


def auto_engines(device: str) -> int:
    """`--data-parallel auto` on `device`: one engine per visible GPU for "cuda" (one for
    "cuda:N"), one per usable core on the CPU divided by the CPU engine's threads per process
    (one by default: `evalkit.engine.cpu_threads`), since its small ops scale across processes,
    not threads."""
    if device.startswith("cuda"):
        import torch

        return max(1, torch.cuda.device_count()) if device == "cuda" else 1
    from evalkit.engine.cpu_threads import choose_cpu_threads

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // choose_cpu_threads())


def _default_device() -> str:
    """The device of a run that names none: cuda if a GPU is visible, else cpu (as one engine)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_devices(device: str | None, data_parallel: int | str | None) -> list[str] | None:
    """`--device cuda:0,cuda:1` or `--data-parallel N|auto` -> the worker devices, or None for one
    engine. `--data-parallel N` with one `--device D` gives N engines on D (cuda: cuda:0 … cuda:N-1);
    `auto` picks N for D (or for the default device: cuda if one is visible, else cpu)."""
    devices = [d.strip() for d in (device or "").split(",") if d.strip()]
    if data_parallel is None:
        return devices if len(devices) > 1 else None
    if data_parallel == AUTO:
        if len(devices) > 1:
            return devices
        devices = devices or [_default_device()]
        data_parallel = auto_engines(devices[0])
    if data_parallel < 1:
        raise InputError("--data-parallel must be at least 1")
    if data_parallel > MAX_ENGINES:
        raise InputError(f"--data-parallel {data_parallel}: at most {MAX_ENGINES} engine processes")
    if len(devices) > 1:
        if len(devices) != data_parallel:
            raise InputError(f"--data-parallel {data_parallel} but --device names {len(devices)} devices")
        return devices
    base = devices[0] if devices else _default_device()  # never a cuda:0 the user did not ask for
    if base == "cuda":
        devices = [f"cuda:{i}" for i in range(data_parallel)]
    else:
        devices = [base] * data_parallel
    return devices if data_parallel > 1 else None


def pin_visible_gpu(device: str, visible: str | None) -> tuple[str, str | None]:
    """(device for the worker, its CUDA_VISIBLE_DEVICES): a worker for `cuda:N` sees only that GPU,
    as its cuda:0, so Triton launches, CUDA graphs and the allocator all use it without a current-
    device switch. `visible` is the parent's CUDA_VISIBLE_DEVICES (N indexes into it)."""
    if not device.startswith("cuda"):
        return device, visible
    index = int(device.partition(":")[2] or 0)
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible else None
    if ids is not None and index >= len(ids):
        raise InputError(f"--device {device}: CUDA_VISIBLE_DEVICES={visible} shows {len(ids)} GPUs")
    return "cuda:0", ids[index] if ids is not None else str(index)


def _worker(rank: int, engine_kwargs: dict[str, Any], inbox: Any, outbox: Any, parent_pid: int) -> None:
    """A worker process: build the engine, then answer batches until told to stop (None)."""
    die_with_parent(parent_pid)
    try:
        device, visible = pin_visible_gpu(engine_kwargs["device"], os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible  # before anything initialises CUDA here
        engine_kwargs = {**engine_kwargs, "device": device}
        from evalkit.backends.local import LocalBackend

        backend = LocalBackend(**engine_kwargs)
        outbox.put(("ready", rank, backend.describe()))
    except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which raises it
        outbox.put(("failed", rank, _one_line(exc)))
        return
    while True:
        job = inbox.get()
        if job is None:
            break
        indices, requests = job
        try:
            backend.generate(
                requests, lambda i, res, idx=indices: outbox.put(("result", rank, (idx[i], res)))
            )
            outbox.put(("done", rank, None))
        except BaseException:  # noqa: BLE001
            outbox.put(("failed", rank, traceback.format_exc(limit=8)))
    backend.close()


def _one_line(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"


class DataParallelBackend:
    """The local backend over several devices; `describe()` is the first engine's, plus `devices`."""

    name = "local"

    def __init__(
        self,
        model: str,
        devices: list[str],
        *,
        arm: Any = "fp32",
        kernels: Any = None,
        max_num_seqs: int | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        from evalkit.arm import parse_arm
        from evalkit.kernel_choice import parse_kernels
        from evalkit.model.checkpoint import load_tokenizer, resolve_model_path

        self.arm = parse_arm(arm) if isinstance(arm, str) else arm
        self.kernels = parse_kernels(kernels)
        self.devices = list(devices)
        ctx = mp.get_context("spawn")  # CUDA cannot be re-initialised in a forked child
        self._outbox = ctx.Queue()
        self._inboxes = [ctx.Queue() for _ in self.devices]
        for q in (*self._inboxes, self._outbox):
            # this process never waits at exit to flush what it put: a worker that stops reading
            # (killed, crashed) would otherwise block the exit on a full pipe for ever; a polite
            # close waits for the workers themselves, who have read everything by then
            q.cancel_join_thread()
        self._procs = []
        try:  # an interrupt or failure anywhere in start-up ends the workers already started
            for rank, dev in enumerate(self.devices):
                kw = dict(
                    model=model,
                    arm=self.arm.label,
                    kernels=self.kernels.label,
                    device=dev,
                    max_num_seqs=max_num_seqs,
                    trust_remote_code=trust_remote_code,
                )
                args = (rank, kw, self._inboxes[rank], self._outbox, os.getpid())
                p = ctx.Process(target=_worker, args=args, daemon=True)
                p.start()
                self._procs.append(p)
            self.tokenizer = load_tokenizer(resolve_model_path(model), trust_remote_code)
            ready = {}
            while len(ready) < len(self._procs):
                kind, rank, payload = self._next(START_TIMEOUT_S)
                if kind == "failed":
                    raise InputError(f"engine on {self.devices[rank]} did not start: {payload}")
                ready[rank] = payload
        except BaseException:
            self.stop_now()  # a worker still loading would not read a polite stop for minutes
            raise
        self._description = {**ready[0], "devices": self.devices, "data_parallel": len(self.devices)}

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def _next(self, timeout: float) -> tuple[str, int, Any]:
        """The next message from any worker; a worker that died without a word is an error."""
        waited = 0.0
        while True:
            try:
                return self._outbox.get(timeout=POLL_S)
            except queue.Empty:
                waited += POLL_S
                dead = [self.devices[r] for r, p in enumerate(self._procs) if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"the engine process on {', '.join(dead)} died") from None
                if waited >= timeout:
                    raise RuntimeError(f"no word from the engine processes in {timeout:.0f} s") from None

    def generate(self, requests: list[GenRequest], on_result: OnResult) -> None:
        """Deal the requests out, then pass each result to on_result as it arrives (in this process,
        so the caller's writer stays single). A worker's failure propagates after the results that
        arrived before it were handed over: those are stored, a re-run resumes."""
        n = len(self._procs)
        busy = 0
        try:  # dealing too: a Ctrl-C while the requests are put must not fall back on close()'s wait
            for rank in range(n):
                idx = list(range(rank, len(requests), n))
                if idx:
                    self._inboxes[rank].put((idx, [requests[i] for i in idx]))
                    busy += 1
            while busy:
                kind, rank, payload = self._next(float("inf"))
                if kind == "result":
                    on_result(*payload)
                elif kind == "done":
                    busy -= 1
                else:
                    raise RuntimeError(f"the engine on {self.devices[rank]} failed:\n{payload}")
        except BaseException:  # Ctrl-C, a failed worker: the others' work is moot, end them at once
            self.stop_now()
            raise

    def stop_now(self) -> None:
        """End every worker at once (SIGTERM, then SIGKILL after STOP_GRACE_S): an interrupted or
        failed run does not wait for engines mid-batch. Queued messages are dropped, not flushed.
        A second Ctrl-C during the grace kills the rest at once (every wait here is bounded)."""
        procs, self._procs = self._procs, []
        try:
            for p in procs:
                if p.is_alive():
                    p.terminate()
            deadline = time.monotonic() + STOP_GRACE_S
            for p in procs:
                p.join(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(timeout=STOP_GRACE_S)

    def close(self) -> None:
        """A polite stop: each worker finishes its batch and exits (30 s each, then SIGTERM); an
        interrupt during that wait ends them at once instead."""
        try:
            for inbox, p in zip(self._inboxes, self._procs):
                if p.is_alive():
                    inbox.put(None)
            for p in self._procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)
        except BaseException:
            self.stop_now()
            raise
        self._procs = []
