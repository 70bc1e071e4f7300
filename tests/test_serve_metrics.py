"""`/metrics`' vLLM-compatible series: latency histograms (time to first token, time per output
token, end to end), prompt/generation token counters, running/waiting gauges."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from evalkit.backends.local import make_params
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop
from evalkit.serve.metrics import LoopCollector, RequestLatency


def scrape(text: str) -> dict:
    return {
        (s.name, s.labels.get("le")): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    return LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)


def test_latency_histograms_and_token_counters(engine):
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(loop, engine.tokenizer, make_params, model_name="tiny", describe={})
    try:
        client = TestClient(app)
        usages = []
        for n in (1, 4):
            body = {"prompt": "Hello there", "max_tokens": n, "ignore_eos": True}
            usages.append(client.post("/v1/completions", json=body).json()["usage"])
        m = scrape(client.get("/metrics").text)
    finally:
        loop.stop()
    p = "evalkit:"
    assert m[(p + "prompt_tokens_total", None)] == sum(u["prompt_tokens"] for u in usages)
    assert m[(p + "generation_tokens_total", None)] == sum(u["completion_tokens"] for u in usages) == 5
    assert m[(p + "e2e_request_latency_seconds_count", None)] == 2
    assert m[(p + "time_to_first_token_seconds_count", None)] == 2
    assert m[(p + "time_per_output_token_seconds_count", None)] == 1  # only the 4-token request has a second
    assert (
        0
        < m[(p + "time_to_first_token_seconds_sum", None)]
        <= m[(p + "e2e_request_latency_seconds_sum", None)]
    )
    assert m[(p + "e2e_request_latency_seconds_bucket", "+Inf")] == 2
    assert m[(p + "num_requests_running", None)] == 0 and m[(p + "num_requests_waiting", None)] == 0


def test_running_and_waiting_gauges_split_the_requests_in_flight():
    loop = SimpleNamespace(
        stats=SimpleNamespace(
            as_dict=lambda: {
                **dict.fromkeys(
                    (
                        "steps",
                        "decode_steps",
                        "decode_seqs",
                        "requests",
                        "finished",
                        "generated_tokens",
                        "failed",
                        "aborted",
                        "prompt_tokens",
                        "max_batch",
                    ),
                    0,
                ),
                "mean_batch_size": 0.0,
            }
        ),  # fmt: skip
        in_flight=5,
        waiting=2,
        started_at=0.0,
    )
    got = {}
    for family in LoopCollector(loop, "tiny", RequestLatency("tiny")).collect():
        for s in family.samples:
            got[s.name] = s.value
    assert got["evalkit:num_requests_running"] == 3 and got["evalkit:num_requests_waiting"] == 2
