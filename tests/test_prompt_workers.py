"""Long-context documents built in worker processes give the same run as a serial build."""

from __future__ import annotations

import json

from evalkit.backends.base import GenResult
from evalkit.runner import RunSpec, run_evaluation
from evalkit.tasks.data import BUNDLED_DIR


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


def test_long_context_run_with_worker_processes_equals_serial(tmp_path, monkeypatch):
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

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
