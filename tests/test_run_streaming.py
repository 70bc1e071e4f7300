"""Requests stream into the backend as they are built: a batch goes out as soon as the next group
would wait for its builders, ready groups go together, and the stored samples are those of a
one-shot run. With real long-context tasks built by two worker processes, the run equals a serial
build's."""

from __future__ import annotations

import json

import pytest

from evalkit.backends.base import GenResult
from evalkit.runner import RunSpec, run_evaluation
from evalkit.runner.groups import request_batches
from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest
from evalkit.tasks.data import BUNDLED_DIR


class Groups:
    """Three groups; `ready[k]` says whether group k is built before anyone waits for it."""

    def __init__(self, task, events, ready):
        self.task, self.events, self.ready, self.k = task, events, ready, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.k == len(self.ready):
            raise StopIteration
        self.events.append(f"built {self.task.name}{self.k}")
        reqs = [
            TaskRequest(
                self.task.name, f"{self.task.name}{self.k}", 4, [], [DocRef(self.k, "x")], 100 + self.k
            )
        ]
        self.k += 1
        return reqs

    def next_ready(self):
        return self.k >= len(self.ready) or self.ready[self.k]

    def close(self):
        self.events.append(f"closed {self.task.name}")


class StreamedTask:
    metrics = ["exact"]
    default_lengths = [100, 101, 102]

    def __init__(self, name, events, ready):
        self.name, self.events, self.ready = name, events, ready

    def config(self):
        return {"name": self.name}

    def request_groups(self, **kw):
        return Groups(self, self.events, self.ready)

    def score(self, request, response):
        return [ScoredDoc(d.doc_id, d.target, {"exact": response == "x"}) for d in request.docs]


class RecordingBackend:
    name = "recording"

    def __init__(self, events):
        self.events = events

    def describe(self):
        return {"name": self.name}

    def generate(self, requests, on_result):
        self.events.append("generate " + ",".join(r.prompt for r in requests))
        for i in range(len(requests)):
            on_result(i, GenResult(text="x", n_generated=1))

    def close(self):
        pass


def test_batches_end_where_a_group_would_wait():
    events = []
    a = StreamedTask("a", events, [True, False, True])
    b = StreamedTask("b", events, [True, True, True])
    batches = [
        [(t.name, r[0].prompt) for t, r in batch]
        for batch in request_batches([a, b], {"a": None, "b": None}, {})
    ]
    assert batches == [[("a", "a0")], [("a", "a1"), ("a", "a2"), ("b", "b0"), ("b", "b1"), ("b", "b2")]]


def test_generation_starts_before_later_groups_are_built(tmp_path):
    events = []
    a = StreamedTask("a", events, [True, False, False])
    spec = RunSpec(tasks=[a], out_dir=tmp_path / "run", manifest={"model": {}, "arm": {"label": "x"}})
    out = run_evaluation(spec, RecordingBackend(events), None, progress=False)
    built = [e for e in events if not e.startswith("closed")]
    assert built == ["built a0", "generate a0", "built a1", "generate a1", "built a2", "generate a2"]
    assert out.stored == 3 and out.asked == 3
    again = run_evaluation(spec, RecordingBackend(events := []), None, progress=False)
    assert again.skipped == 3 and again.asked == 0 and not [e for e in events if e.startswith("generate")]


def test_long_context_run_with_worker_processes_equals_serial(tmp_path, monkeypatch):
    from evalkit.tasks.testing import tiny_tokenizer

    tok = tiny_tokenizer(data_dir=str(BUNDLED_DIR))
    runs = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", workers)
        spec = RunSpec(
            tasks=["passkey", "niah_single_1"],
            out_dir=tmp_path / workers,
            lengths=[300, 600],
            limit=3,
            data_dir=str(BUNDLED_DIR),
            manifest={"model": {}, "arm": {"label": "x"}},
        )
        run_evaluation(spec, RecordingBackend([]), tok, progress=False)
        rows = [json.loads(x) for x in (tmp_path / workers / "samples.jsonl").read_text().splitlines()]
        runs[workers] = {(r["task"], r["doc_id"], r["length"]): r["prompt_hash"] for r in rows}
    assert len(runs["1"]) == 12 and runs["1"] == runs["2"]


class FailingBackend(RecordingBackend):
    def generate(self, requests, on_result):
        raise RuntimeError("engine died")


def test_a_failed_run_stops_the_builders(tmp_path):
    events = []
    a, b = StreamedTask("a", events, [True, False, False]), StreamedTask("b", events, [False] * 3)
    spec = RunSpec(tasks=[a, b], out_dir=tmp_path / "run", manifest={"model": {}, "arm": {"label": "x"}})
    with pytest.raises(RuntimeError, match="engine died"):
        run_evaluation(spec, FailingBackend(events), None, progress=False)
    assert "closed a" in events and "closed b" in events and "built a1" not in events
