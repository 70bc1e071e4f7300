"""The OpenAI-compatible backend against a real local server that misbehaves on purpose."""

from __future__ import annotations

import socket
import time

import pytest
from helpers.faulty_server import FAULTS, FaultyServer, answer_for, prompt_key

from evalkit.backends.base import GenRequest
from evalkit.backends.openai_remote import OpenAIBackend, normalize_base_url, truncate_at_stop
from evalkit.errors import EvalkitError

STOP = ["Question:"]


def _requests(n: int) -> list[GenRequest]:
    return [
        GenRequest(prompt=f"Question: what is {i} + {i}?\nAnswer:", max_new_tokens=16, stop=STOP)
        for i in range(n)
    ]


def _expected(req: GenRequest) -> str:
    body = {"prompt": req.prompt}
    return truncate_at_stop(answer_for(prompt_key(body)), STOP)[0]


def _collect(backend: OpenAIBackend, reqs: list[GenRequest]) -> dict:
    got: dict[int, list] = {}
    backend.generate(reqs, lambda i, r: got.setdefault(i, []).append(r))
    return got


def _backend(urls: list[str], **kw) -> OpenAIBackend:
    kw = {"concurrency": 4, "timeout": 0.5, "max_retries": 2, "backoff_base": 0.01, **kw}
    return OpenAIBackend(urls, **kw)


def test_every_request_ends_answered_or_with_an_error_exactly_once():
    reqs = _requests(30)
    with FaultyServer(slow_s=1.5) as srv:
        backend = _backend([srv.url])
        got = _collect(backend, reqs)
        info = backend.run_info()
    assert sorted(got) == list(range(30))
    assert all(len(v) == 1 for v in got.values())  # none duplicated
    assert set(srv.fate.values()) == {"ok", "dead", *FAULTS}
    n_err = 0
    for i, req in enumerate(reqs):
        res = got[i][0]
        key = prompt_key({"prompt": req.prompt})
        fate = srv.fate[key]
        if fate == "dead":
            n_err += 1
            assert res.error and "500" in res.error and res.finish_reason == "error"
            assert srv.attempts[key] == 3  # first try + 2 retries
        else:
            assert res.error is None, (fate, res.error)
            assert res.text == _expected(req)
            assert res.finish_reason == "stop"  # the client cut the server's junk at "Question:"
            assert srv.attempts[key] == (1 if fate == "ok" else 2)
    assert n_err == list(srv.fate.values()).count("dead") > 0 and info["errors"] == n_err
    assert info["system_fingerprints"] == ["fp_faulty"]
    assert info["reported_models"] == ["faulty-model"]


def test_replicas_share_the_work_and_give_the_same_answers_as_one_server():
    reqs = _requests(24)
    ok = lambda key, attempt: "ok"
    with FaultyServer(ok, delay_s=0.02) as a, FaultyServer(ok, delay_s=0.02) as b:
        one = _collect(_backend([a.url]), reqs)
        a.answered.clear()
        two = _collect(_backend([a.url, b.url]), reqs)
        assert sum(a.answered.values()) > 0 and sum(b.answered.values()) > 0
        assert sum(a.answered.values()) + sum(b.answered.values()) == 24
    assert {i: r[0].text for i, r in one.items()} == {i: r[0].text for i, r in two.items()}


def test_a_retry_moves_to_the_next_replica_when_one_is_down():
    reqs = _requests(10)
    with FaultyServer(lambda k, a: "500") as dead, FaultyServer(lambda k, a: "ok") as alive:
        got = _collect(_backend([dead.url, alive.url], max_retries=1), reqs)
    assert all(r[0].error is None for r in got.values())


def test_chat_prompts_use_chat_completions_and_extensions_are_sent():
    msgs = [{"role": "user", "content": "hello"}]
    req = GenRequest(prompt=msgs, max_new_tokens=5, stop=STOP, ignore_eos=True, min_tokens=2)
    with FaultyServer(lambda k, a: "ok") as srv:
        got = _collect(_backend([srv.url], seed=7), [req])
        body = srv.bodies[-1]
    assert got[0][0].text == truncate_at_stop(answer_for(prompt_key({"messages": msgs})), STOP)[0]
    assert body["messages"] == msgs and body["temperature"] == 0 and body["seed"] == 7
    assert body["max_tokens"] == 5 and body["stop"] == STOP
    assert body["ignore_eos"] is True and body["min_tokens"] == 2


def test_a_bad_request_is_not_retried():
    req = _requests(1)[0]
    with FaultyServer(lambda k, a: "400") as srv:
        got = _collect(_backend([srv.url], max_retries=3), [req])
        assert srv.attempts[prompt_key({"prompt": req.prompt})] == 1
    assert "400" in got[0][0].error


def test_unreachable_server_is_a_clear_error_not_a_hang():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    with pytest.raises(EvalkitError, match="cannot list models"):
        _backend([f"127.0.0.1:{port}"], max_retries=1)
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize(
    "url,expected",
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        ("http://h:1/v1/", "http://h:1/v1"),
        ("http://h:1/v1/completions", "http://h:1/v1"),
        ("https://h/v1/chat/completions", "https://h/v1"),
    ],
)
def test_normalize_base_url(url, expected):
    assert normalize_base_url(url) == expected


def test_manifest_description_records_models_and_version():
    with FaultyServer() as srv:
        d = _backend([srv.url]).describe()
    assert d["model"] == "faulty-model"
    assert d["models"][srv.url]["data"][0]["id"] == "faulty-model"
    assert d["server_versions"][srv.url] == {"version": "faulty-1.0"}


def test_replicas_serving_different_models_are_refused():
    with FaultyServer(model="a") as a, FaultyServer(model="b") as b:
        with pytest.raises(EvalkitError, match="replicas differ"):
            _backend([a.url, b.url])
