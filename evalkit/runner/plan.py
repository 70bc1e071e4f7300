"""What is left to ask: every task's requests minus the questions already in samples.jsonl."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.errors import InputError
from evalkit.store.schema import SampleKey, question_key


@dataclass
class WorkItem:
    task: Any  # the Task object (scores the response)
    request: Any  # its TaskRequest
    missing: set[str]  # str(doc_id) of the docs of this request not yet stored
    sample: int | None = None  # sample j of a sampled run (k per question); None: greedy


@dataclass
class Plan:
    items: list[WorkItem]
    total_docs: int
    done_docs: int


def build_plan(
    tasks: list[Any], requests_by_task: dict[str, list[Any]], done_keys: set, samples: int | None = None
) -> Plan:
    """Keep a request while any of its docs is missing; refuse duplicate keys within a task. With
    `samples` (a sampled run's k), every request is asked k times, sample j keyed by j."""
    items: list[WorkItem] = []
    total = done = 0
    indices: list[int | None] = [None] if samples is None else list(range(samples))
    for task in tasks:
        seen: set[SampleKey] = set()
        for req, j in ((r, j) for r in requests_by_task[task.name] for j in indices):
            missing = set()
            for doc in req.docs:
                key = question_key(task.name, doc.doc_id, req.length, j)
                if key in seen:
                    raise InputError(
                        f"task {task.name} produced doc {doc.doc_id} (length {req.length}) twice"
                    )
                seen.add(key)
                total += 1
                if key in done_keys:
                    done += 1
                else:
                    missing.add(str(doc.doc_id))
            if missing:
                items.append(WorkItem(task, req, missing, j))
    return Plan(items, total, done)
