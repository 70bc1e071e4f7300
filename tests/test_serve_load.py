"""Load test: 64 concurrent clients x 8 requests against `evalkit serve` on a tiny model: every
request is answered with what the engine gives in-process, none is lost, and requests really
share the engine's batch (mean decode batch size reported by /health)."""

from __future__ import annotations

import asyncio

import httpx

from evalkit.backends.local import encode_prompt, make_params
from evalkit.serve.server import Server

CLIENTS, PER_CLIENT, MAX_TOKENS = 64, 8, 3


def _prompt(c: int, k: int) -> str:
    return f"Question {c}-{k}: how many?"


async def _client(url: str, c: int) -> list[tuple[int, int, str, int]]:
    out = []
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        for k in range(PER_CLIENT):
            r = await http.post(
                "/completions", json={"prompt": _prompt(c, k), "max_tokens": MAX_TOKENS, "ignore_eos": True}
            )
            r.raise_for_status()
            body = r.json()
            out.append((c, k, body["choices"][0]["text"], body["usage"]["completion_tokens"]))
    return out


async def _all(url: str) -> list[tuple[int, int, str, int]]:
    results = await asyncio.wait_for(asyncio.gather(*(_client(url, c) for c in range(CLIENTS))), 600)
    return [x for r in results for x in r]


def test_64_clients_times_8_requests_all_answered_and_batched(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=64)
    with Server(engine, model_name="tiny") as srv:
        got = asyncio.run(_all(srv.url))
        health = httpx.get(srv.url[: -len("/v1")] + "/health").json()
    assert len(got) == CLIENTS * PER_CLIENT
    assert len({(c, k) for c, k, _, _ in got}) == CLIENTS * PER_CLIENT  # none lost or duplicated
    assert all(n == MAX_TOKENS for *_, n in got)
    assert health["finished"] == CLIENTS * PER_CLIENT and health["failed"] == 0
    # the answers are the engine's: check one request per client against an in-process engine
    oracle = LLMEngine(engine.loaded, state_dtype="fp32", device="cpu", max_num_seqs=64)
    params = make_params(max_tokens=MAX_TOKENS, stop=[], ignore_eos=True)
    picked = [(c, c % PER_CLIENT) for c in range(CLIENTS)]
    want = oracle.generate(
        [encode_prompt(oracle.tokenizer, _prompt(c, k)) for c, k in picked], params, use_tqdm=False
    )
    texts = {(c, k): t for c, k, t, _ in got}
    assert [texts[ck] for ck in picked] == [o.text for o in want]
    print(
        f"\n64x8 load: mean decode batch {health['mean_batch_size']:.1f}, max {health['max_batch']}, "
        f"{health['decode_steps']} decode steps"
    )
    assert health["mean_batch_size"] > 1
