"""Tokenizer work is bounded before it starts (issue 43 item 6): a text whose length alone shows it
cannot fit is refused without tokenizing; a long prompt being tokenized does not hold up a short
request; a token-id prompt is checked by its length before its ids."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from evalkit.backends.local import make_params
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop
from evalkit.serve.tokenize import LONG_CHARS, TokenizerLanes, longest_token_chars

CONTEXT = 20_000  # the served context


class GatedTokenizer:
    """The engine's tokenizer; a long text waits at a gate the test opens, and every text is counted."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []
        self.started, self.gate = threading.Event(), threading.Event()

    def encode(self, text, *a, **kw):
        self.texts.append(len(text))
        if len(text) > LONG_CHARS:
            self.started.set()
            assert self.gate.wait(60)
            text = text[:100]
        return self.inner.encode(text, *a, **kw)

    def __deepcopy__(self, memo):
        raise TypeError("shared on purpose: the test watches one object")

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __len__(self):
        return len(self.inner)


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    return LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)


@pytest.fixture
def served(engine):
    tok = GatedTokenizer(engine.tokenizer)
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(loop, tok, make_params, model_name="tiny", describe={}, max_model_len=CONTEXT)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, tok
    finally:
        tok.gate.set()
        loop.stop()


def test_the_length_bound_is_an_upper_bound_of_characters_per_token(engine):
    tok = engine.tokenizer
    bound = longest_token_chars(tok)
    assert bound == max(len(k.encode()) for k in tok.get_vocab())
    text = "The pass key is 71432. " * 50 + "日本語のテキスト" * 20 + "🙂 é" * 30
    ids = tok.encode(text)
    assert len(text) <= bound * len(ids)  # the bound never refuses a text that fits
    assert all(len(tok.decode([t])) <= bound for t in ids)
    lanes = TokenizerLanes(tok)
    assert lanes.too_long("x" * (bound * 10), 10) is None
    assert "more than the model's context of 10" in lanes.too_long("x" * (bound * 10 + 1), 10)


def test_a_hopeless_text_is_refused_without_tokenizing(served):
    client, tok = served
    over = longest_token_chars(tok.inner) * CONTEXT + 1
    r = client.post("/v1/completions", json={"prompt": "a" * over, "max_tokens": 1})
    assert r.status_code == 400 and "characters" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "b" * over}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    assert tok.texts == []


def test_a_short_request_completes_while_a_long_prompt_is_tokenized(served):
    client, tok = served
    long_reply = {}

    def send_long():
        long_reply["r"] = client.post("/v1/completions", json={"prompt": "word " * 10_000, "max_tokens": 1})

    t = threading.Thread(target=send_long)
    t.start()
    try:
        assert tok.started.wait(60)  # the long prompt is being tokenized (held at the gate)
        short = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1})
        assert short.status_code == 200 and short.json()["choices"]
        assert t.is_alive() and not tok.gate.is_set()  # it finished while the long one still waits
    finally:
        tok.gate.set()
        t.join(60)
    assert long_reply["r"].status_code == 200


def test_a_token_id_prompt_is_checked_by_length_first(served):
    client, _ = served
    r = client.post("/v1/completions", json={"prompt": [10**9] * (CONTEXT + 1), "max_tokens": 1})
    assert r.status_code == 400 and "exceeds the model's" in r.json()["error"]["message"]
    r = client.post("/v1/completions", json={"prompt": [[1, 2]] * 9, "n": 128, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"
