"""A run streams long-context prompts into the engine as they are built (`evalkit.runner.stream`): the
samples equal a run that builds every prompt first (the stub engine and the shipped reference model),
the engine gets its first prompt before the last doc is built, a doc that fails to build stops the
run with its own error and no worker process left, and a streamed run killed midway resumes."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from evalkit.backends.base import GenRequest, ListFeed, drain
from evalkit.backends.local import LocalBackend
from evalkit.bench.stub_engine import StubEngine
from evalkit.errors import InputError
from evalkit.reference_model import has_reference_model
from evalkit.runner import RunSpec, run_evaluation
from evalkit.tasks.data import BUNDLED_DIR
from evalkit.tasks.long_context.base import SizedTask
from evalkit.tasks.registry import get_task

DATA = str(BUNDLED_DIR)


@pytest.fixture(scope="module")
def tok():
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    return tiny_tokenizer(data_dir=DATA)


def _spec(out, stream: bool, **kw) -> RunSpec:
    options = dict(tasks=["passkey", "niah_single_1"], lengths=[300, 600], limit=3, gold_logprob=True)
    options.update(kw)
    return RunSpec(
        out_dir=out, data_dir=DATA, stream=stream, manifest={"model": {}, "arm": {"label": "x"}}, **options
    )


def _rows(out) -> list[dict]:
    """samples.jsonl in file order, every field but the wall-clock timings."""
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "timings"} for r in rows]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_streamed_run_equals_a_run_that_builds_first(tmp_path, tok, monkeypatch, workers):
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", workers)
    runs = {}
    for stream in (False, True):
        out = tmp_path / str(stream)
        backend = LocalBackend(engine=StubEngine(tok))
        outcome = run_evaluation(_spec(out, stream), backend, tok, progress=False)
        assert outcome.stored == 12 and outcome.errors == 0
        runs[stream] = _rows(out)
    assert len(runs[True]) == 12 and runs[True] == runs[False]  # the same order too (the stub is FIFO)
    assert all(r["gold_logprob"] is not None for r in runs[True])
    assert not mp.active_children()  # every pool shut down


def test_the_engine_gets_the_first_prompt_before_the_last_doc_is_built(tmp_path, tok, monkeypatch):
    """The last doc's worker waits until the engine has a prompt: a run that built every doc first
    would fail here (after the wait's timeout), a streamed one passes at once."""
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "2")
    engine_has_a_prompt = mp.get_context("fork").Event()  # forked workers share it
    sized = SizedTask.sized_request

    def last_waits(self, view, target, seed, index, ctx, chat):
        if (target, index) == (600, 2) and not engine_has_a_prompt.wait(timeout=60):
            raise InputError("the engine got no prompt while docs were being built")
        return sized(self, view, target, seed, index, ctx, chat)

    monkeypatch.setattr(SizedTask, "sized_request", last_waits)
    engine = StubEngine(tok)
    add = engine.add_request
    engine.add_request = lambda *a, **k: (engine_has_a_prompt.set(), add(*a, **k))[1]
    spec = _spec(tmp_path, True, tasks=["passkey"])
    outcome = run_evaluation(spec, LocalBackend(engine=engine), tok, progress=False)
    assert outcome.stored == 6 and not mp.active_children()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_doc_that_fails_to_build_stops_the_run_with_its_error(tmp_path, tok, monkeypatch, workers):
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", workers)
    sized = SizedTask.sized_request

    def failing(self, view, target, seed, index, ctx, chat):
        if target == 600 and index == 1:
            raise InputError("passkey prompt: cannot fit 600 tokens")
        return sized(self, view, target, seed, index, ctx, chat)

    monkeypatch.setattr(SizedTask, "sized_request", failing)  # forked workers inherit it
    spec = _spec(tmp_path / "r", True, tasks=["passkey"])
    with pytest.raises(InputError, match="cannot fit 600 tokens"):
        run_evaluation(spec, LocalBackend(engine=StubEngine(tok)), tok, progress=False)
    assert not mp.active_children()  # the pool is shut down: no worker left behind
    if (tmp_path / "r" / "samples.jsonl").exists():  # streamed: what was answered is on disk
        done = [(r["doc_id"], r["length"]) for r in _rows(tmp_path / "r")]
        assert (1, 600) not in done and len(done) <= 4


class _Dies(StubEngine):
    """A stub engine killed (Ctrl-C) after `n` steps."""

    def __init__(self, tok, n):
        super().__init__(tok)
        self.n = n

    def step(self):
        if self.n == 0:
            raise KeyboardInterrupt
        self.n -= 1
        return super().step()


def test_a_streamed_run_killed_midway_resumes(tmp_path, tok, monkeypatch):
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "2")
    out = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(_spec(out, True), LocalBackend(engine=_Dies(tok, 5)), tok, progress=False)
    assert not mp.active_children()
    assert len(_rows(out)) == 5  # every answer given before the kill is on disk
    outcome = run_evaluation(_spec(out, True), LocalBackend(engine=StubEngine(tok)), tok, progress=False)
    assert outcome.skipped == 5 and outcome.stored == 7
    run_evaluation(_spec(tmp_path / "ref", False), LocalBackend(engine=StubEngine(tok)), tok, progress=False)
    key = lambda r: (r["task"], r["doc_id"], r["length"])  # noqa: E731
    assert sorted(_rows(out), key=key) == sorted(_rows(tmp_path / "ref"), key=key)


def test_outlines_are_the_built_requests_keys(tok):
    build = get_task("passkey").start_requests(tokenizer=tok, lengths=[300, 600], limit=2, data_dir=DATA)
    try:
        got = [build.get(j) for j in range(4)]
    finally:
        build.close()
    keys = [(r.length, [d.doc_id for d in r.docs], r.max_new_tokens) for r in got]
    assert keys == [(r.length, [d.doc_id for d in r.docs], r.max_new_tokens) for r in build.outlines()]
    assert got == get_task("passkey").requests(tokenizer=tok, lengths=[300, 600], limit=2, data_dir=DATA)
    assert get_task("gsm8k_longdecode").start_requests(tokenizer=tok) is None  # builds its own way


def test_a_backend_without_streaming_gets_the_whole_list(tok):
    reqs = [GenRequest(prompt=f"q{i}", max_new_tokens=1) for i in range(3)]
    assert drain(ListFeed(reqs)) == reqs


@pytest.mark.skipif(not has_reference_model(), reason="needs the shipped reference model")
def test_streamed_run_of_the_reference_model_equals_a_run_that_builds_first(tmp_path, monkeypatch):
    from evalkit.reference_model import default_model_path

    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "2")
    backend = LocalBackend(str(default_model_path()), arm="fp16", device="cpu")
    runs = {}
    for stream in (False, True):
        spec = _spec(tmp_path / str(stream), stream, lengths=[256], limit=2, max_new_tokens=4)
        run_evaluation(spec, backend, backend.tokenizer, progress=False)
        runs[stream] = sorted(_rows(tmp_path / str(stream)), key=lambda r: (r["task"], r["doc_id"]))
    assert len(runs[True]) == 4 and runs[True] == runs[False]
    assert all(r["generated_ids"] and r["gold_logprob"] is not None for r in runs[True])
