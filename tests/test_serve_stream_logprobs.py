"""`evalkit serve` streams log-probabilities (`stream: true` with `logprobs`), as vLLM does: each
chunk carries those of the tokens it sends. Read with the openai client; the oracle is the same
request not streamed (itself checked against the engine's forced decoding in
test_serve_logprobs.py): the chunks' text and log-probabilities concatenate to its."""

from __future__ import annotations

import httpx
import openai
import pytest

from evalkit.serve.server import Server

PROMPT = "Question: what is 2+2?\nAnswer:"
MESSAGES = [{"role": "user", "content": "Count: one two three"}]


@pytest.fixture(scope="module")
def server(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp16", device="cpu")
    with Server(engine, model_name="tiny") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url, api_key="x", max_retries=0) as c:
        yield c


def _joined_completion(chunks):
    joined = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for ch in chunks:
        lp = ch.choices[0].logprobs if ch.choices else None
        if lp is not None:
            for key in joined:
                joined[key] += list(getattr(lp, key))
    return joined


@pytest.mark.parametrize("with_stop", [False, True])
def test_completion_stream_logprobs_concatenate_to_the_plain_response(client, with_stop):
    kw = dict(model="tiny", prompt=PROMPT, max_tokens=12, temperature=0, logprobs=2)
    stop = None
    if with_stop:  # a stop string the greedy answer meets after a few tokens
        full = client.completions.create(**kw, extra_body={"ignore_eos": True}).choices[0].text
        stop = [full[len(full) // 2 :][:2]]
        kw["stop"] = stop
    plain = client.completions.create(**kw, extra_body={"ignore_eos": True}).choices[0]
    assert (plain.finish_reason == "stop") == (stop is not None)  # the stop string is met
    chunks = list(client.completions.create(**kw, stream=True, extra_body={"ignore_eos": True}))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == plain.text
    joined = _joined_completion(chunks)
    want = plain.logprobs
    assert joined["tokens"] == want.tokens and joined["text_offset"] == want.text_offset
    assert joined["token_logprobs"] == want.token_logprobs and joined["top_logprobs"] == want.top_logprobs
    with_lps = [ch for ch in chunks if ch.choices and ch.choices[0].logprobs is not None]
    assert len(with_lps) > 1  # streamed per chunk, not all at the end
    assert all(ch.choices[0].logprobs.tokens for ch in with_lps)


def test_chat_stream_logprobs_concatenate_to_the_plain_response(client):
    kw = dict(model="tiny", messages=MESSAGES, max_tokens=10, temperature=0, logprobs=True, top_logprobs=2)
    plain = client.chat.completions.create(**kw, extra_body={"ignore_eos": True}).choices[0]
    chunks = list(client.chat.completions.create(**kw, stream=True, extra_body={"ignore_eos": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.message.content
    content = [
        c for ch in chunks if ch.choices and ch.choices[0].logprobs for c in ch.choices[0].logprobs.content
    ]
    assert [c.model_dump() for c in content] == [c.model_dump() for c in plain.logprobs.content]
    assert len(content) == 10 and all(len(c.top_logprobs) == 2 for c in content)
    assert sum(1 for ch in chunks if ch.choices and ch.choices[0].logprobs) > 1


def test_a_stream_without_logprobs_sends_none_and_echo_is_still_refused(client, server):
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=4, stream=True))
    assert all(ch.choices[0].logprobs is None for ch in chunks if ch.choices)
    body = {"prompt": PROMPT, "max_tokens": 2, "stream": True, "echo": True, "logprobs": 1}
    bad = httpx.post(server.url + "/completions", json=body, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "stream"
