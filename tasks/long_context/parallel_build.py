"""Build a sized task's docs in worker processes, reading and filling the prompt cache.

Fitting one 128k-token doc takes 1-2 s of tokenization on one core, and the docs are independent
(doc i at target L draws from its own seeded rng), so they are built in a process pool.
Workers are forked on Linux: they inherit the task, tokenizer and shared
material without pickling, and only tokenize (never touch a GPU). The docs come back in the serial
order, equal to a serial build. `EVALKIT_PROMPT_WORKERS` sets the pool size (1: serial, in this
process); by default one worker per core but one, at most 16."""

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


class SizedBuild:
    """The docs of one task being built: the cached ones read at once, the rest submitted to a worker
    pool at creation (in target order); `requests()` collects them in that order."""

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
        self.cache = PromptCache.open(task, view, ctx, seed, chat)
        self.built: dict[tuple[int, int], TaskRequest] = {}
        todo = []
        for job in ((t, i) for t in self.lengths for i in range(n_docs)):
            hit = self.cache.get(*job) if self.cache else None
            if hit is None:
                todo.append(job)
            else:
                self.built[job] = hit
                on_doc()
        self.pool, self.futures = None, {}
        workers = worker_count(len(todo))
        if workers > 1:
            self.pool = ProcessPoolExecutor(
                workers, mp_context=_context(), initializer=_init, initargs=(task, view, ctx, seed, chat)
            )
            self.futures = {job: self.pool.submit(_build, *job) for job in todo}

    def _get(self, target: int, index: int) -> TaskRequest:
        job = (target, index)
        if job not in self.built:
            fut = self.futures.pop(job, None)
            if fut is not None:
                req = fut.result()[2]
            else:
                req = self.task.sized_request(self.view, target, self.seed, index, self.ctx, self.chat)
            self.built[job] = req
            if self.cache:
                self.cache.put(target, index, req)
            self.on_doc()
        return self.built[job]

    def requests(self) -> list[TaskRequest]:
        """Every (target, doc) request in target-then-doc order; the pool is shut down however this
        ends (a failed doc, Ctrl-C)."""
        try:
            return [self._get(t, i) for t in self.lengths for i in range(self.n_docs)]
        finally:
            self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)  # docs being built finish (seconds)
            self.pool = None


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
