"""The run's requests in batches handed to the backend as soon as they are built.

A long-context task builds its docs in worker processes (`SizedTask.request_groups`) and hands
out one list per target length; groups that are ready go to the engine together, and a group
still building is not waited for: the engine generates what is ready while the rest builds, so it
is not idle while 128k-token documents are fitted. The next task starts building when the current
one hands out its first group. A task without `request_groups` (GSM8K, many-shot, long-decode) is
one group, built when its turn comes (counted as ready: nothing to overlap it with)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _start(task: Any, lengths: list[int] | None, build: dict[str, Any]) -> Iterator[list[Any]]:
    stream = getattr(task, "request_groups", None)
    if stream is not None:
        return stream(lengths=lengths, **build)
    return iter([task.requests(lengths=lengths, **build)])


def _ready(groups: Iterator[list[Any]] | None) -> bool:
    peek = getattr(groups, "next_ready", None)
    return True if peek is None else bool(peek())


def request_batches(
    tasks: list[Any], lengths: dict[str, list[int] | None], build: dict[str, Any]
) -> Iterator[list[tuple[Any, list[Any]]]]:
    """Lists of (task, requests) groups, in task then length order; a list ends where a group
    (of this task, or the first of the next) would have to wait for its builders. `build` holds
    requests()'s other keyword arguments (tokenizer, limit, seed, data_dir, apply_chat_template)."""
    batch: list[tuple[Any, list[Any]]] = []
    current = pending = None
    try:
        pending = _start(tasks[0], lengths[tasks[0].name], build) if tasks else None
        for k, task in enumerate(tasks):
            current, pending = pending, None
            nxt = tasks[k + 1] if k + 1 < len(tasks) else None
            for group in current:
                if pending is None and nxt is not None:
                    pending = _start(nxt, lengths[nxt.name], build)
                batch.append((task, group))
                if not (_ready(current) and _ready(pending)):  # something would wait: ask what is here
                    yield batch
                    batch = []
            if pending is None and nxt is not None:
                pending = _start(nxt, lengths[nxt.name], build)
        if batch:
            yield batch
    finally:  # a run that stops early (an error, Ctrl-C) stops the builders too
        for groups in (current, pending):
            getattr(groups, "close", lambda: None)()
