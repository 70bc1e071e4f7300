"""`evalkit serve` against hostile or careless clients (issue 16): API key, body size limit,
tokenizing off the event loop, OpenAI-style 4xx for bad text and bad JSON, and CLI checks that
happen before the model loads (busy port, missing --port-file folder, open host without a key)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from fastapi.testclient import TestClient

from evalkit.backends.local import make_params
from evalkit.cli import main as cli
from evalkit.commands.serve import is_loopback
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop


class SpyTokenizer:
    """The engine's tokenizer, recording which thread each encode ran on."""

    def __init__(self, inner):
        self.inner, self.threads = inner, []

    def encode(self, *a, **kw):
        self.threads.append(threading.current_thread().name)
        return self.inner.encode(*a, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __len__(self):
        return len(self.inner)


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    return LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)


def _client(engine, **kw):
    loop = EngineLoop(EngineAdapter(engine)).start()
    tok = kw.pop("tokenizer", engine.tokenizer)
    app = create_app(
        loop,
        tok,
        make_params,
        model_name="tiny",
        describe={},
        max_model_len=engine.config.max_model_len,
        vocab_size=engine.arch.vocab_size,
        **kw,
    )
    return TestClient(app, raise_server_exceptions=False), loop


def _is_openai_error(r, status):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["message"]
    return err


def test_api_key_guards_v1_and_leaves_health_open(engine):
    client, loop = _client(engine, api_key="s3cret")
    try:
        body = {"prompt": "Hi", "max_tokens": 1}
        _is_openai_error(client.post("/v1/completions", json=body), 401)
        _is_openai_error(client.get("/v1/models", headers={"Authorization": "Bearer nope"}), 401)
        ok = client.post("/v1/completions", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["choices"]
        assert client.get("/health").status_code == 200
    finally:
        loop.stop()


def test_a_body_over_the_limit_is_a_413_with_a_clear_message(engine):
    client, loop = _client(engine, max_body_bytes=1000)
    try:
        err = _is_openai_error(client.post("/v1/completions", json={"prompt": "x" * 2000}), 413)
        assert "1000 bytes" in err["message"]
        chunked = client.post("/v1/completions", content=iter([b'{"prompt": "', b"x" * 2000, b'"}']))
        _is_openai_error(chunked, 413)  # no Content-Length: counted while reading
        assert client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1}).status_code == 200
    finally:
        loop.stop()


def test_prompts_are_tokenized_off_the_event_loop(engine):
    spy = SpyTokenizer(engine.tokenizer)
    client, loop = _client(engine, tokenizer=spy)
    try:
        assert client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1}).status_code == 200
        assert spy.threads and all(t.startswith("evalkit-tokenize") for t in spy.threads)
    finally:
        loop.stop()


def test_bad_text_and_bad_json_are_openai_400s(engine):
    client, loop = _client(engine)
    try:
        lone = '{"prompt": "a\\ud800b", "max_tokens": 1}'  # a lone surrogate
        headers = {"content-type": "application/json"}
        err = _is_openai_error(client.post("/v1/completions", content=lone, headers=headers), 400)
        assert err["param"] == "prompt"
        err = _is_openai_error(client.post("/v1/completions", content='{"prompt": ', headers=headers), 400)
        assert err["param"] is None and "JSON" in err["message"]
    finally:
        loop.stop()


def test_loopback_hosts():
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.org"))


def test_a_busy_port_is_reported_before_the_model_loads(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc = cli(["serve", "--arm", "fp32", "--port", str(port), "--model", str(tmp_path / "no-model")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot listen" in err and "Traceback" not in err


def test_port_file_in_a_missing_folder_is_refused_first(tmp_path, capsys):
    pf = tmp_path / "missing" / "port"
    rc = cli(
        ["serve", "--arm", "fp32", "--port", "0", "--port-file", str(pf), "--model", str(tmp_path / "x")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "--port-file" in err and "does not exist" in err


def test_an_open_host_without_a_key_warns(tmp_path, capsys):
    rc = cli(["serve", "--arm", "fp32", "--host", "0.0.0.0", "--port", "0", "--model", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "without --api-key" in err  # warned, then failed on the missing model


def test_metrics_are_prometheus_text_with_what_health_reports(engine):
    from prometheus_client.parser import text_string_to_metric_families

    client, loop = _client(engine)
    try:
        r = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "ignore_eos": True})
        assert r.status_code == 200
        before_scrape = time.time()
        scrape = client.get("/metrics")
        after_scrape = time.time()
        health = client.get("/health").json()
    finally:
        loop.stop()
    assert scrape.headers["content-type"].startswith("text/plain")
    samples = {s.name: s for family in text_string_to_metric_families(scrape.text) for s in family.samples}
    assert samples["evalkit:requests_finished_total"].value == health["finished"] == 1
    assert samples["evalkit:generation_tokens_total"].value == health["generated_tokens"] == 3
    assert samples["evalkit:requests_finished_total"].labels == {"model_name": "tiny"}
    for name in ("engine_steps_total", "decode_steps_total", "requests_aborted_total", "mean_batch_size"):
        assert f"evalkit:{name}" in samples
    # seconds since the loop started, read during the scrape
    uptime = samples["evalkit:uptime_seconds"].value
    assert before_scrape - loop.started_at <= uptime <= after_scrape - loop.started_at
