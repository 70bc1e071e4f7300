"""Small `evalkit serve` defects of issue 43 (item 8): `min_tokens` above the cap a request sets
(`max_completion_tokens` too) is a 400; abandoned streams leave no task pending (asyncio's "Task
was destroyed but it is pending!" in the log); Ctrl-C while the model loads says nothing about
samples on disk."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import httpx
import pytest

from evalkit.serve.server import Server


@pytest.fixture(scope="module")
def server(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)
    with Server(engine, model_name="tiny") as srv:
        yield srv


@pytest.mark.parametrize(
    "cap, param",
    [({"max_tokens": 4}, "max_tokens"), ({"max_completion_tokens": 4}, "max_completion_tokens")],
)
@pytest.mark.parametrize("endpoint", ["/completions", "/chat/completions"])
def test_min_tokens_above_the_cap_is_a_400(server, cap, param, endpoint):
    body = {"min_tokens": 9, **cap}
    body.update(
        {"prompt": "Hi"} if endpoint == "/completions" else {"messages": [{"role": "user", "content": "Hi"}]}
    )
    r = httpx.post(server.url + endpoint, json=body, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "min_tokens" and f"must not exceed {param} (4)" in err["message"]


async def _stream_then_leave(url: str) -> None:
    body = {"prompt": "Count forever.", "stream": True, "ignore_eos": True, "max_tokens": 100_000}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async with http.stream("POST", "/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    return  # leaving closes the connection while the server waits for tokens


def test_abandoned_streams_leave_no_task_pending(server, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")

    async def leave() -> None:
        await asyncio.gather(*(_stream_then_leave(server.url) for _ in range(4)))

    asyncio.run(leave())
    deadline = time.monotonic() + 60
    while server.loop.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.loop.in_flight == 0
    r = httpx.post(server.url + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60)
    assert r.status_code == 200
    time.sleep(0.2)  # the server's loop runs the cancellations
    gc.collect()
    pending = [r.getMessage() for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    assert pending == []


def test_ctrl_c_while_serve_loads_says_nothing_about_samples(monkeypatch, capsys, tmp_path):
    from evalkit.backends import local
    from evalkit.cli import main as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(local.LocalBackend, "__init__", interrupted)
    assert cli(["serve", "--arm", "fp32", "--port", "0", "--model", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "evalkit serve: interrupted"
