"""`evalkit serve`'s HTTP surface, driven by real HTTP clients (httpx and the openai SDK)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from evalkit.backends.local import encode_prompt, make_params
from evalkit.serve.server import Server


@pytest.fixture(scope="module")
def served_engine(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    return LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp16", device="cpu")


@pytest.fixture(scope="module")
def engine(served_engine):
    """The oracle: a second engine on the same weights (an engine belongs to one thread)."""
    from evalkit.engine import LLMEngine

    return LLMEngine(served_engine.loaded, state_dtype="fp16", device="cpu")


@pytest.fixture(scope="module")
def server(served_engine):
    with Server(served_engine, model_name="tiny", aliases=("/path/tiny",)) as srv:
        yield srv


def direct(engine, prompt, **kw):
    """The oracle: the same engine asked in-process, without HTTP."""
    kw = {"max_tokens": 16, "stop": [], **kw}
    ids = encode_prompt(engine.tokenizer, prompt)
    return engine.generate([ids], [make_params(**kw)], use_tqdm=False)[0]


def sse_events(resp: httpx.Response) -> list:
    events = []
    for line in resp.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_models_health_version(server):
    with httpx.Client(base_url=server.url) as c:
        models = c.get("/models").json()
        assert models["data"][0]["id"] == "tiny"
        root = server.url[: -len("/v1")]
        health = httpx.get(root + "/health").json()
        assert health["status"] == "ok" and "mean_batch_size" in health and health["state_dtype"] == "fp16"
        assert httpx.get(root + "/version").json()["system_fingerprint"].startswith("fp_")


@pytest.mark.parametrize("prompt", ["Question: 2+2?\nAnswer:", "zz", "héllo wörld"])
def test_completion_equals_the_engine_in_process(server, engine, prompt):
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop=["q"])
    want = direct(engine, prompt, max_tokens=24, stop=["q"])
    assert r.choices[0].text == want.text
    assert r.choices[0].finish_reason == {"eos": "stop"}.get(want.finish_reason, want.finish_reason)
    assert r.usage.completion_tokens == want.n_generated
    assert r.system_fingerprint.startswith("fp_")


def test_token_id_prompts_and_several_prompts(server, engine):
    with httpx.Client(base_url=server.url) as c:
        ids = encode_prompt(engine.tokenizer, "abc")
        one = c.post("/completions", json={"prompt": ids, "max_tokens": 8}).json()
        assert one["choices"][0]["text"] == direct(engine, "abc", max_tokens=8).text
        many = c.post("/completions", json={"prompt": ["abc", "xyz"], "max_tokens": 8}).json()
        assert [ch["text"] for ch in many["choices"]] == [
            direct(engine, p, max_tokens=8).text for p in ("abc", "xyz")
        ]


# Prompts whose greedy continuation on the tiny hybrid checkpoint (seed 0, fp16 state) meets EOS
# within 64 tokens (found by a search over "Question {i}: how many?"; the test re-checks it).
EOS_PROMPTS = [f"Question {i}: how many?" for i in (11, 18, 4, 50)]


def test_ignore_eos_and_min_tokens_are_honoured(server, engine):
    base = next((p, o) for p in EOS_PROMPTS if (o := direct(engine, p, max_tokens=64)).finish_reason == "eos")
    prompt, out = base
    assert out.n_generated < 64
    with httpx.Client(base_url=server.url, timeout=120) as c:
        plain = c.post("/completions", json={"prompt": prompt, "max_tokens": 64}).json()
        assert plain["choices"][0]["finish_reason"] == "stop"  # OpenAI's name for EOS
        assert plain["usage"]["completion_tokens"] == out.n_generated
        r = c.post("/completions", json={"prompt": prompt, "max_tokens": 64, "ignore_eos": True}).json()
        assert r["usage"]["completion_tokens"] == 64 and r["choices"][0]["finish_reason"] == "length"
        n_min = out.n_generated + 5
        r2 = c.post("/completions", json={"prompt": prompt, "max_tokens": 64, "min_tokens": n_min}).json()
    assert r2["usage"]["completion_tokens"] >= n_min
    assert r2["choices"][0]["text"] == direct(engine, prompt, max_tokens=64, min_tokens=n_min).text


def test_streaming_completion_concatenates_to_the_full_text(server, engine):
    prompt = "stream me please"
    want = direct(engine, prompt, max_tokens=40, stop=["x"])
    body = {
        "prompt": prompt,
        "max_tokens": 40,
        "stop": ["x"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", server.url + "/completions", json=body, timeout=30) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if e["choices"]]
    assert "".join(e["choices"][0]["text"] for e in chunks) == want.text
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert events[-2]["usage"]["completion_tokens"] == want.n_generated


def test_chat_plain_and_streaming(server, engine):
    msgs = [{"role": "user", "content": "hi there"}]
    want = direct(engine, msgs, max_tokens=20)
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    r = client.chat.completions.create(model="/path/tiny", messages=msgs, max_tokens=20, temperature=0)
    assert r.choices[0].message.content == want.text
    parts = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=20, stream=True)
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == want.text


@pytest.mark.parametrize(
    "body,status,param",
    [
        ({"prompt": "x", "temperature": -0.7}, 400, "temperature"),
        ({"prompt": "x", "top_p": 0}, 400, "top_p"),
        ({"prompt": "x", "top_p": 1.5}, 400, "top_p"),
        ({"prompt": "x", "top_k": -2}, 400, "top_k"),
        ({"prompt": "x", "seed": 2**64}, 400, "seed"),
        ({"prompt": "x", "model": "other"}, 404, "model"),
        ({"prompt": "x", "n": 0}, 400, "n"),
        ({"prompt": "x", "n": 2, "stream": True}, 400, "n"),
        ({"prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
        ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ({"max_tokens": 3}, 400, "prompt"),
        ({"prompt": ""}, 400, "prompt"),
        ({"prompt": [10**9]}, 400, "prompt"),
        ({"prompt": "x", "logprobs": 21}, 400, "logprobs"),
        ({"prompt": "x", "logprobs": -1}, 400, "logprobs"),
        ({"prompt": "x", "echo": True, "logprobs": 1, "stream": True}, 400, "stream"),
    ],
)
def test_bad_requests_get_openai_style_errors(server, body, status, param):
    r = httpx.post(server.url + "/completions", json=body)
    assert r.status_code == status
    err = r.json()["error"]
    assert err["param"] == param and err["message"] and err["type"]


def test_malformed_json_and_unknown_route(server):
    r = httpx.post(
        server.url + "/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "error" in r.json()
    assert httpx.get(server.url + "/nope").status_code == 404
