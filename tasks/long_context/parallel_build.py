"""Build a sized task's docs in worker processes, reading and filling the prompt cache.

Fitting one 128k-token doc takes 1-2 s of tokenization on one core, and the docs are independent
(doc i at target L draws from its own seeded rng), so they are built in a process pool.
Workers are forked on Linux: they inherit the task, tokenizer and shared
material without pickling, and only tokenize (never touch a GPU). The docs come back in the serial
order, equal to a serial build. `EVALKIT_PROMPT_WORKERS` sets the pool size (1: serial, in this
process); by default one worker per core but one, at most 16.

A run streams them (`SizedTask.start_requests`, `evalkit.runner.stream`): doc j goes to the engine
as soon as it and every doc before it are built, while the workers build the rest."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import TaskRequest
from evalkit.tasks.long_context.prompt_cache import PromptCache

WORKERS_ENV = "EVALKIT_PROMPT_WORKERS"
MAX_DEFAULT_WORKERS = 16

_job: dict[str, Any] = {}  # the worker's task, tokenizer view, material, seed, chat flag


def worker_count(n_docs: int) -> int:
    env = os.environ.get(WORKERS_ENV)
    if env:
        try:
            n = int(env)
        except ValueError:
            raise InputError(f"{WORKERS_ENV}={env!r}: expected a whole number of worker processes") from None
    else:
        n = min(MAX_DEFAULT_WORKERS, (os.cpu_count() or 1) - 1)
    return max(1, min(n, n_docs))


def _init(task: Any, view: Any, ctx: Any, seed: int, chat: bool) -> None:
    _job.update(task=task, view=view, ctx=ctx, seed=seed, chat=chat)


def _build(target: int, index: int) -> tuple[int, int, TaskRequest]:
    j = _job
    return target, index, j["task"].sized_request(j["view"], target, j["seed"], index, j["ctx"], j["chat"])


def _context():
    """fork on Linux (workers inherit the tokenizer and material); spawn elsewhere (macOS frameworks
    are not fork-safe), which pickles them to each worker once."""
    if sys.platform.startswith("linux"):
        # the tokenizers library would print a warning per forked worker and turn its threads off there
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        return mp.get_context("fork")
    return mp.get_context("spawn")


def _use_pool(workers: int, background: bool) -> bool:
    """A pool for several workers. A streamed build (`background`) uses one even for a single worker,
    so that docs are built while this process runs the engine; `EVALKIT_PROMPT_WORKERS=1` still
    means a serial build here."""
    return workers > 1 or (background and workers == 1 and not os.environ.get(WORKERS_ENV))


class SizedBuild:
    """The docs of one task being built: the cached ones read at once, the rest submitted to a worker
    pool (in target order) at creation, or with `background` at the first `get` (so that the builds of
    a run's tasks take the cores one after another). `get(j)` is doc j of that order, `requests()`
    all of them; `outlines()` says what each will be before it is built."""

    def __init__(
        self,
        task: Any,
        view: Any,
        lengths: list[int],
        n_docs: int,
        seed: int,
        ctx: Any,
        chat: bool,
        on_doc: Callable[[], None] = lambda: None,
        background: bool = False,
    ) -> None:
        self.task, self.view, self.seed, self.ctx, self.chat, self.on_doc = (
            task,
            view,
            seed,
            ctx,
            chat,
            on_doc,
        )
        self.lengths, self.n_docs = list(lengths), n_docs
        self.jobs = [(t, i) for t in self.lengths for i in range(n_docs)]
        self.cache = PromptCache.open(task, view, ctx, seed, chat)
        self.built: dict[tuple[int, int], TaskRequest] = {}
        self.todo = []
        for job in self.jobs:
            hit = self.cache.get(*job) if self.cache else None
            if hit is None:
                self.todo.append(job)
            else:
                self.built[job] = hit
                on_doc()
        self.pool, self.futures = None, {}
        self.workers = worker_count(len(self.todo))
        self.use_pool = bool(self.todo) and _use_pool(self.workers, background)
        # worker processes will build docs while this process works: what a streamed run overlaps
        self.in_background = background and self.use_pool
        if not background:
            self._start()

    def _start(self) -> None:
        """Submit the docs not cached to a worker pool (once; nothing when building serially)."""
        if self.use_pool and self.todo:
            task, view, ctx, seed, chat = self.task, self.view, self.ctx, self.seed, self.chat
            self.pool = ProcessPoolExecutor(
                self.workers,
                mp_context=_context(),
                initializer=_init,
                initargs=(task, view, ctx, seed, chat),
            )
            self.futures = {job: self.pool.submit(_build, *job) for job in self.todo}
        self.todo = []

    def outlines(self) -> list[TaskRequest]:
        """Every request as `task.outline` describes it before it is built (its key, length and
        token budget), in `get`'s order: what a run plans and sizes its progress with."""
        return [self.task.outline(t, i) for t, i in self.jobs]

    def get(self, j: int, block: bool = True) -> TaskRequest | None:
        """Doc j (target-then-doc order): cached, built, or (`block`) waited for, or built here when
        the build is serial; None when it is not ready and `block` is False."""
        self._start()
        job = target, index = self.jobs[j]
        if job not in self.built:
            fut = self.futures.get(job)
            if not block and (fut is None or not fut.done()):
                return None  # a serial build builds a doc only when asked to wait for it
            self.futures.pop(job, None)
            if fut is not None:
                req = fut.result()[2]  # a failed doc raises its own error here
            else:
                req = self.task.sized_request(self.view, target, self.seed, index, self.ctx, self.chat)
            self.built[job] = req
            if self.cache:
                self.cache.put(*job, req)
            self.on_doc()
        return self.built[job]

    def requests(self) -> list[TaskRequest]:
        """Every (target, doc) request in target-then-doc order; the pool is shut down however this
        ends (a failed doc, Ctrl-C)."""
        try:
            return [self.get(j) for j in range(len(self.jobs))]
        finally:
            self.close()

    def close(self) -> None:
        """Shut the pool down (idempotent): docs not started are cancelled, those being built finish
        (seconds), and no worker process is left behind."""
        self.todo = []
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
            # a cancelled doc is built here if it is asked for after all
            self.futures = {job: f for job, f in self.futures.items() if not f.cancelled()}


def build_sized_requests(
    task: Any,
    view: Any,
    lengths: list[int],
    n_docs: int,
    seed: int,
    ctx: Any,
    chat: bool,
    on_doc: Callable[[], None] = lambda: None,
) -> list[TaskRequest]:
    """Every (target, doc) request of `task`, in target-then-doc order: cached ones read back, the
    rest built (in parallel where there are several) and cached. `on_doc()` is called per doc."""
    return SizedBuild(task, view, lengths, n_docs, seed, ctx, chat, on_doc).requests()
