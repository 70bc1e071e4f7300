"""Hand a run's requests to the backend in plan order, each as soon as its prompt is built.

Why: fitting a long-context doc to its exact token length takes seconds of tokenization, and a run
that built every doc before asking the engine anything kept a GPU idle for all of that (on an
H200, a cold run's end-to-end prompt throughput was 0.54x the engine's own). A sized task's docs are
built by worker processes (`SizedTask.start_requests`) while the engine prefills the ones already
built.

The plan is made from outlines (a sized task knows every doc's key, length and token budget before
building it), so resume, duplicate keys and the progress bar's sizes work as before. When a
request's turn comes, the feed swaps its outline for the built request (checking that they agree)
and makes its `GenRequest`. Requests go out strictly in plan order, the order a run that built
everything first hands them to the engine; the engine is batch-invariant, so the samples are the
same. One task's docs are built at a time: its worker pool is shut down when the feed moves past its
last doc, or when the run ends however it ends (`close`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalkit.backends.base import GenRequest
from evalkit.runner.plan import WorkItem


def start_build(task: Any, tokenizer: Any, **options: Any) -> tuple[list[Any], Any] | None:
    """(outlines, build) when worker processes will build some of `task`'s docs while the engine
    works (`SizedTask.start_requests`); (the requests, None) when every doc is cached; None when
    there is nothing to overlap (a serial build: `EVALKIT_PROMPT_WORKERS=1`) or the task builds its
    requests another way: its `requests()` is then called as before."""
    start = getattr(task, "start_requests", None)
    build = None if start is None else start(tokenizer=tokenizer, **options)
    if build is None:
        return None
    if build.in_background:
        return build.outlines(), build
    if build.todo:  # a serial build: the task's own requests(), with its progress bar
        build.close()
        return None
    return build.requests(), None  # every doc cached: read once, here


def _key(req: Any) -> tuple[Any, ...]:
    return req.length, [d.doc_id for d in req.docs], req.max_new_tokens


class PlanFeed:
    """A `RequestFeed` over the plan's items: item k is ready when it needs no building, or when
    its build (`sources[k]` = (build, position in the build)) has it."""

    def __init__(
        self,
        items: list[WorkItem],
        sources: dict[int, tuple[Any, int]],
        make: Callable[[int], GenRequest],
    ) -> None:
        self.items, self.sources, self.make = items, sources, make
        self.next = 0  # the first item not handed out yet
        self.current: Any = None  # the build being read

    @classmethod
    def for_plan(
        cls, items: list[WorkItem], builds: list[tuple[Any, list[Any]]], make: Callable[[int], GenRequest]
    ) -> PlanFeed:
        """`builds`: (build, the outlines it gave); a plan item holding one of those outlines is read
        from that build."""
        where = {id(o): (build, j) for build, outlines in builds for j, o in enumerate(outlines)}
        sources = {k: where[id(it.request)] for k, it in enumerate(items) if id(it.request) in where}
        return cls(items, sources, make)

    def take(self, block: bool) -> list[tuple[int, GenRequest]]:
        """The items ready now, in plan order (with `block`, at least one unless none is left)."""
        out: list[tuple[int, GenRequest]] = []
        while self.next < len(self.items):
            k = self.next
            if k in self.sources:
                build, j = self.sources[k]
                if build is not self.current:
                    if self.current is not None:
                        self.current.close()  # every doc it owes the plan is handed out: free its workers
                    self.current = build
                req = build.get(j, block=block and not out)
                if req is None:
                    break
                self._swap(self.items[k], req)
            out.append((k, self.make(k)))
            self.next += 1
        return out

    @staticmethod
    def _swap(item: WorkItem, req: Any) -> None:
        if _key(req) != _key(item.request):
            raise RuntimeError(
                f"{req.task}: the built request {_key(req)} differs from its outline {_key(item.request)}"
            )
        item.request = req
