"""Property: whatever body a client sends to `evalkit serve`, the answer is a 2xx or a 4xx in
OpenAI's JSON error format, never a 5xx or a traceback (issue 16). Random JSON, valid requests
with fields replaced by random values, and raw bytes; a tiny model with max_model_len 24 keeps
every generation short, and the example counts are bounded so this runs in seconds."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalkit.backends.local import make_params
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop

ODD_STRINGS = ["", "\ud800", "a\udfffb", "\x00", "tiny", "Question: 1+1?", "é" * 40, "<|eos|>"]
# any code point, lone surrogates included (JSON can carry them as \\udXXX escapes)
texts = st.sampled_from(ODD_STRINGS) | st.text(st.characters(exclude_categories=()), max_size=20)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
TEMPLATES = {
    "/v1/completions": {"model": "tiny", "prompt": "Hi", "max_tokens": 2, "stream": False, "stop": ["\n"]},
    "/v1/chat/completions": {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 2,
        "stream": False,
    },
}
FIELDS = sorted(
    {*TEMPLATES["/v1/completions"], *TEMPLATES["/v1/chat/completions"]}
    | {"temperature", "n", "ignore_eos", "min_tokens", "max_completion_tokens", "logprobs", "echo"}
    | {"stream_options", "seed", "top_p"}
)


small = st.integers(-2, 30)
PLAUSIBLE = {
    "max_tokens": small,
    "max_completion_tokens": small,
    "min_tokens": small,
    "n": small,
    "seed": small,
    "stream": st.booleans(),
    "ignore_eos": st.booleans(),
    "echo": st.booleans(),
    "temperature": st.sampled_from([0, 0.0, 0.7, -1]),
    "stop": texts | st.lists(texts, max_size=3),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "model": texts,
}


@st.composite
def mutated(draw):
    path = draw(st.sampled_from(sorted(TEMPLATES)))
    body = dict(TEMPLATES[path])
    if draw(st.booleans()):  # the text itself: odd characters, lists of prompts or of token ids
        if "prompt" in body:
            body["prompt"] = draw(
                texts | st.lists(texts, max_size=3) | st.lists(st.integers(-5, 5000), max_size=4)
            )
        else:
            role = draw(st.sampled_from(["user", "system", "assistant", "tool", ""]))
            body["messages"] = [{"role": role, "content": draw(texts)}]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(FIELDS))
        if draw(st.booleans()) and key in body:
            del body[key]
        else:  # half the time a value of the right kind (so the request gets further), else anything
            body[key] = draw(PLAUSIBLE.get(key, json_values) | json_values)
    return path, json.dumps(body, allow_nan=True).encode()


@st.composite
def random_json(draw):
    return draw(st.sampled_from(sorted(TEMPLATES))), json.dumps(draw(json_values), allow_nan=True).encode()


@st.composite
def raw_bytes(draw):
    return draw(st.sampled_from(sorted(TEMPLATES))), draw(st.binary(max_size=64))


@pytest.fixture(scope="module")
def client(tiny_hybrid_ckpt):
    from fastapi.testclient import TestClient

    from evalkit.engine import LLMEngine

    engine = LLMEngine(
        str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=4, max_model_len=24
    )
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(
        loop,
        engine.tokenizer,
        make_params,
        model_name="tiny",
        describe={},
        max_model_len=engine.config.max_model_len,
        vocab_size=engine.arch.vocab_size,
        max_body_bytes=4096,
    )
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
    loop.stop()


def _check(client, path: str, body: bytes) -> None:
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code < 500, (r.status_code, r.text[:500], body[:200])
    assert "Traceback" not in r.text
    if r.status_code >= 400:
        err = r.json()["error"]
        assert isinstance(err["message"], str) and err["message"] and err["code"] == r.status_code
    elif r.headers["content-type"].startswith("text/event-stream"):
        events = [x[len("data: ") :] for x in r.text.splitlines() if x.startswith("data: ")]
        assert events[-1] == "[DONE]"
        for e in events[:-1]:
            assert "error" not in json.loads(e), e
    else:
        assert r.json()["choices"]


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(case=mutated())
@example(case=("/v1/completions", b'{"prompt": "a\\ud800b", "max_tokens": 1}'))  # once a plain-text 500
@example(case=("/v1/completions", b'{"prompt": ["ok", "\\udfff"], "max_tokens": 1, "stream": true}'))
@example(
    case=("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "Hi"}], "model": "\\ud800"}')
)
def test_mutated_valid_requests_get_2xx_or_a_4xx_json_error(client, case):
    _check(client, *case)


@FUZZ
@given(case=random_json() | raw_bytes())
def test_random_bodies_get_a_4xx_json_error(client, case):
    _check(client, *case)
