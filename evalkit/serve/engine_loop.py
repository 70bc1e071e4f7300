"""One thread owns the engine; HTTP handlers hand it requests and await futures.

Why a thread: the engine is not thread-safe and a step is long CPU/GPU work, so it must not run
on the event loop. Between two steps the thread admits every queued request, so concurrent HTTP
requests share the engine's continuous batch. The mean batch size is measured here (the number
of sequences the engine advanced per decode step), so a load test can prove the batching.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Finished:
    text: str
    token_ids: list[int]
    finish_reason: str
    n_prompt: int
    n_generated: int
    flags: list[str] = field(default_factory=list)
    logprobs: list[Any] | None = None  # the engine's TokenLogprob per generated token, when asked
    prompt_logprobs: list[Any] | None = None  # per prompt token (first: None), when asked
    timings: dict[str, float] = field(default_factory=dict)  # the engine's first_token_s, total_s


@dataclass
class BatchStats:
    steps: int = 0
    decode_steps: int = 0
    decode_seqs: int = 0  # sum over decode steps of the sequences advanced
    max_batch: int = 0
    requests: int = 0
    finished: int = 0
    generated_tokens: int = 0
    failed: int = 0
    aborted: int = 0  # requests dropped mid-flight (client gone, or shutdown)
    prompt_tokens: int = 0  # prompt tokens of finished requests

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["mean_batch_size"] = self.decode_seqs / self.decode_steps if self.decode_steps else 0.0
        return d


class Aborted(Exception):
    """The request was dropped before it finished: its client went away, or the server is stopping."""


class ShuttingDown(Aborted):
    """The server is stopping and gave up on this request."""


Snapshot = tuple[list[int], Optional[list[Any]]]


class Handle:
    """What an HTTP handler waits on: the final output, and token snapshots when streaming.

    Setting `cancelled` (any thread) makes the engine thread abort the sequence at its next
    iteration, i.e. before the next engine step: the slot is freed and its state zeroed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stream: bool, stream_logprobs: bool = False) -> None:
        self._loop = loop
        self.submitted_at = time.perf_counter()  # latencies count the wait for admission too
        self.admitted_at: float | None = None
        self.future: asyncio.Future[Finished] = loop.create_future()
        # snapshots: (token ids so far, their log-probabilities when the request asked for them)
        self.stream: asyncio.Queue[Snapshot] | None = asyncio.Queue() if stream else None
        self.stream_logprobs = stream and stream_logprobs
        self.cancelled = False

    def _deliver(self, out: Finished | BaseException) -> None:
        def set_it() -> None:
            if self.future.done():
                return
            if self.cancelled:  # nobody waits for it any more: no "exception never retrieved"
                self.future.cancel()
            elif isinstance(out, BaseException):
                self.future.set_exception(out)
            else:
                self.future.set_result(out)

        self._call(set_it)

    def _snapshot(self, token_ids: list[int], logprobs: list[Any] | None = None) -> None:
        if self.stream is not None:
            self._call(self.stream.put_nowait, (token_ids, logprobs))

    def _call(self, fn: Any, *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the HTTP side's event loop is closed: nobody is left to tell
            pass


class EngineLoop:
    def __init__(self, adapter: Any, *, idle_wait_s: float = 0.02) -> None:
        self.adapter = adapter
        self.stats = BatchStats()
        self._inbox: queue.Queue[tuple[Any, Any, Handle]] = queue.Queue()
        self._live: dict[Any, Handle] = {}
        self._stop = threading.Event()
        self._abort_all: str | None = None
        self._idle_wait_s = idle_wait_s
        self._thread = threading.Thread(target=self._run, name="evalkit-engine-loop", daemon=True)
        self.started_at = time.time()
        # called on the engine thread for each finished request (the /metrics latency histograms)
        self.on_finished: list[Callable[[Finished, Handle], None]] = []

    def start(self) -> EngineLoop:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def waiting(self) -> int:
        """Requests not yet running: queued for admission, or admitted without a state slot."""
        return self._inbox.qsize() + getattr(self.adapter, "num_waiting", lambda: 0)()

    @property
    def in_flight(self) -> int:
        """Requests admitted to the engine and not yet finished (read from any thread)."""
        return len(self._live)

    def cancel(self, handle: Handle) -> None:
        """Drop `handle`'s request (its client left); the engine thread aborts it before its next step."""
        handle.cancelled = True

    def abort_all(self, why: str = "server shutting down") -> None:
        """Fail every queued and in-flight request before the next step (graceful shutdown's deadline)."""
        self._abort_all = why

    def submit(self, prompt_ids: list[int], params: Any, *, stream: bool = False) -> Handle:
        wants_logprobs = getattr(params, "logprobs", None) is not None
        handle = Handle(asyncio.get_running_loop(), stream, stream_logprobs=wants_logprobs)
        self._inbox.put((prompt_ids, params, handle))
        if not self.alive:
            self._fail_queued("the engine loop is not running")
        return handle

    def _fail_queued(self, why: str, error: type[Exception] = RuntimeError) -> None:
        while True:
            try:
                _, _, handle = self._inbox.get_nowait()
            except queue.Empty:
                return
            handle._deliver(error(why))

    # ---- the engine thread -------------------------------------------------------------------

    def _admit(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=self._idle_wait_s) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            prompt_ids, params, handle = item
            if handle.cancelled:
                handle._deliver(Aborted("client disconnected"))
            else:
                try:
                    rid = self.adapter.add(prompt_ids, params)
                    handle.admitted_at = time.perf_counter()
                    self._live[rid] = handle
                    self.stats.requests += 1
                except Exception as exc:  # noqa: BLE001 -- a bad request fails alone
                    handle._deliver(exc)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _reap(self) -> None:
        """Abort the sequences whose clients have gone (or all of them, after `abort_all`)."""
        why = self._abort_all
        if why is not None:
            self._fail_queued(why, ShuttingDown)
        for rid, handle in list(self._live.items()):
            if handle.cancelled or why is not None:
                self.adapter.abort(rid)
                del self._live[rid]
                self.stats.aborted += 1
                handle._deliver(ShuttingDown(why) if why is not None else Aborted("client disconnected"))

    def iterate(self) -> None:
        """One turn of the engine thread: admit new requests, drop abandoned ones, step once."""
        self._admit(block=not self.adapter.has_unfinished())
        self._reap()
        if not self.adapter.has_unfinished():
            return
        try:
            step = self.adapter.step()
        except Exception as exc:  # noqa: BLE001 -- fail what is in flight; the engine is suspect
            self.stats.failed += len(self._live)
            for handle in self._live.values():
                handle._deliver(RuntimeError(f"engine step failed: {exc!r}"))
            self._live.clear()
            self._stop.set()  # /health turns 503: a supervisor should restart the server
            return
        self.stats.steps += 1
        if step.decode_batch:
            self.stats.decode_steps += 1
            self.stats.decode_seqs += step.decode_batch
            self.stats.max_batch = max(self.stats.max_batch, step.decode_batch)
        streaming = {rid for rid, h in self._live.items() if h.stream is not None}
        if streaming:
            for rid, toks in self.adapter.partial_tokens(streaming - step.finished.keys()).items():
                handle = self._live[rid]
                lps = self.adapter.partial_logprobs(rid) if handle.stream_logprobs else None
                handle._snapshot(toks, lps)
        for rid, out in step.finished.items():
            handle = self._live.pop(rid, None)
            self.stats.finished += 1
            self.stats.generated_tokens += out.n_generated
            self.stats.prompt_tokens += out.n_prompt
            if handle is not None:
                for observe in self.on_finished:
                    observe(out, handle)
                handle._deliver(out)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.iterate()
        for handle in self._live.values():
            handle._deliver(ShuttingDown("server shutting down"))
        self._live.clear()
        self._fail_queued("server shutting down", ShuttingDown)
