"""Build a sized task's docs in worker processes, reading and filling the prompt cache.

Fitting one 128k-token doc takes 1-2 s of tokenization on one core, and the docs are independent
(doc i at target L draws from its own seeded rng), so they are built in a process pool, the longest
targets first. Workers are forked where the platform allows it: they inherit the task, tokenizer
and shared material without pickling, and only tokenize (never touch a GPU). The docs come back
in the serial order, equal to a serial build. `EVALKIT_PROMPT_WORKERS` sets the pool size (1:
serial, in this process); by default one worker per core but one, at most 16."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
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
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


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
    jobs = [(target, i) for target in lengths for i in range(n_docs)]
    cache = PromptCache.open(task, view, ctx, seed, chat)
    built: dict[tuple[int, int], TaskRequest] = {}
    for job in jobs:
        hit = cache.get(*job) if cache else None
        if hit is not None:
            built[job] = hit
            on_doc()
    todo = sorted((j for j in jobs if j not in built), key=lambda j: (-j[0], j[1]))

    def keep(target: int, index: int, req: TaskRequest) -> None:
        built[(target, index)] = req
        if cache:
            cache.put(target, index, req)
        on_doc()

    workers = worker_count(len(todo))
    if workers <= 1:
        for target, index in todo:
            keep(target, index, task.sized_request(view, target, seed, index, ctx, chat))
    else:
        with ProcessPoolExecutor(
            workers, mp_context=_context(), initializer=_init, initargs=(task, view, ctx, seed, chat)
        ) as pool:
            for fut in as_completed([pool.submit(_build, *j) for j in todo]):
                keep(*fut.result())
    return [built[j] for j in jobs]
