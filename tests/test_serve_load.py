"""Load test: 64 concurrent clients x 8 requests against `evalkit serve`: every request is
answered with exactly what the engine gives in-process, and requests really share batches."""

from __future__ import annotations

import asyncio

import httpx

from evalkit.backends.local import encode_prompt, make_params
from evalkit.serve.server import Server

CLIENTS, PER_CLIENT, MAX_TOKENS = 64, 8, 6


def _prompt(c: int, k: int) -> str:
    return f"client {c} request {k}: "


async def _client(url: str, c: int) -> list[tuple[int, int, str]]:
    out = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for k in range(PER_CLIENT):
            r = await http.post("/completions", json={"prompt": _prompt(c, k), "max_tokens": MAX_TOKENS,
                                                      "ignore_eos": True})
            r.raise_for_status()
            out.append((c, k, r.json()["choices"][0]["text"]))
    return out


async def _all(url: str) -> list[tuple[int, int, str]]:
    results = await asyncio.wait_for(asyncio.gather(*(_client(url, c) for c in range(CLIENTS))), 240)
    return [x for r in results for x in r]


def test_64_clients_times_8_requests_all_answered_and_batched():
    from helpers.fake_engine import FakeEngine

    engine = FakeEngine(step_delay_s=0.002)
    with Server(engine, model_name="tiny") as srv:
        got = asyncio.run(_all(srv.url))
        health = httpx.get(srv.url[: -len("/v1")] + "/health").json()
    assert len(got) == CLIENTS * PER_CLIENT
    assert len({(c, k) for c, k, _ in got}) == CLIENTS * PER_CLIENT  # none lost or duplicated
    params = make_params(engine, max_tokens=MAX_TOKENS, stop=[], ignore_eos=True)
    prompts = [(c, k) for c in range(CLIENTS) for k in range(PER_CLIENT)]
    want = engine.generate([encode_prompt(engine.tokenizer, _prompt(c, k)) for c, k in prompts],
                           [params] * len(prompts))
    assert {(c, k): t for c, k, t in got} == {ck: o.text for ck, o in zip(prompts, want)}
    assert health["finished"] == CLIENTS * PER_CLIENT
    print(f"mean batch size {health['mean_batch_size']:.1f}, max {health['max_batch']}")
    assert health["mean_batch_size"] > 1
