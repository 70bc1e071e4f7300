"""Log-probabilities on `evalkit serve`'s /v1/completions (vLLM's format: `logprobs=k`, `echo`
with `max_tokens=0` for prompt log-probabilities), checked against the engine's own scoring;
then evalkit's paired measure (`run --server ... --gold-logprob`) and lm-eval's
`local-completions` loglikelihood through a real server on 127.0.0.1."""

from __future__ import annotations

import json

import httpx
import pytest

from evalkit.cli import main as cli
from evalkit.engine.sampling import SamplingParams
from evalkit.serve.server import Server
from evalkit.tasks.data import BUNDLED_DIR

PROMPT, ANSWER = "The pass key is", " 71432"


@pytest.fixture(scope="module")
def served_engine(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    return LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp16", device="cpu")


@pytest.fixture(scope="module")
def oracle(served_engine):
    """A second engine on the same weights, asked in-process (an engine belongs to one thread)."""
    from evalkit.engine import LLMEngine

    return LLMEngine(served_engine.loaded, state_dtype="fp16", device="cpu")


@pytest.fixture(scope="module")
def server(served_engine):
    with Server(served_engine, model_name="tiny") as srv:
        yield srv


def complete(server, **body):
    r = httpx.post(server.url + "/completions", json={"model": "tiny", **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_echo_with_no_new_tokens_gives_the_prompt_log_probabilities(server, oracle):
    text = PROMPT + ANSWER
    ids = oracle.tokenizer.encode(text)
    (choice,) = complete(server, prompt=text, max_tokens=0, echo=True, logprobs=2)["choices"]
    lp = choice["logprobs"]
    assert choice["text"] == text and len(lp["tokens"]) == len(ids)
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert "".join(lp["tokens"]) == text and lp["text_offset"][3] == len("".join(lp["tokens"][:3]))
    for cut in (1, 3, len(ids) - 1):  # the engine's loglikelihood of every split is a sum of these
        want, greedy = oracle.loglikelihood([(ids[:cut], ids[cut:])])[0]
        assert sum(lp["token_logprobs"][cut:]) == pytest.approx(want, rel=1e-6, abs=1e-6)
        tops = lp["top_logprobs"][cut:]
        assert greedy == all(t == max(top.values()) for t, top in zip(lp["token_logprobs"][cut:], tops))
    assert all(len(top) in (2, 3) for top in lp["top_logprobs"][1:])  # top 2, plus the token itself


def test_generated_token_log_probabilities_are_the_decode_steps(server, oracle):
    body = complete(server, prompt=PROMPT, max_tokens=5, logprobs=3, ignore_eos=True)
    lp = body["choices"][0]["logprobs"]
    gen = oracle.generate([PROMPT], use_tqdm=False)[0]  # greedy: the same tokens
    ids = gen.token_ids[:5]
    assert lp["tokens"] == [oracle.tokenizer.decode([t]) for t in ids]
    (forced,) = oracle.forced_decode([(PROMPT, ids)])  # decode-mode scores of the same tokens
    assert lp["token_logprobs"] == pytest.approx(forced.token_logprobs, rel=1e-6, abs=1e-6)
    for t, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        assert max(top.values()) == t  # greedy: the chosen token is the most likely
    assert lp["text_offset"] == [sum(len(x) for x in lp["tokens"][:i]) for i in range(5)]


def test_echo_with_generation_puts_the_prompt_first(server):
    (choice,) = complete(server, prompt=PROMPT, max_tokens=2, echo=True, logprobs=1, ignore_eos=True)[
        "choices"
    ]
    lp = choice["logprobs"]
    assert choice["text"].startswith(PROMPT) and len(choice["text"]) > len(PROMPT)
    n_prompt = len(lp["tokens"]) - 2
    assert lp["text_offset"][n_prompt] == len(PROMPT) and lp["token_logprobs"][0] is None
    plain = complete(server, prompt=[[5, 6, 7]], max_tokens=0, echo=True)["choices"][0]
    assert plain["logprobs"] is None and plain["text"]  # the decoded token ids, echoed


def test_run_through_evalkit_serve_records_the_paired_measure(server, oracle, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--server", server.url, "--model", str(oracle.loaded.path), "--arm", "serve-fp16"]
    args += ["--tasks", "passkey", "--lengths", "512", "--limit", "2", "--max-new-tokens", "4"]
    assert (
        cli([*args, "--gold-logprob", "--no-progress", "--data-dir", str(BUNDLED_DIR), "--out", str(out)])
        == 0
    )
    assert "latency p50/p90/p99: e2e " in capsys.readouterr().out  # beside tokens/s
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2
    for s in samples:
        assert s["gold_error"] is None and s["gold_mode"] == "prompt", s["gold_error"]
        prompt, gold = s["prompt"], "".join(s["gold_tokens"])
        assert gold.strip() == s["target"]
        enc = oracle.tokenizer(prompt + gold, return_offsets_mapping=True)
        starts = [a for a, _ in enc["offset_mapping"]]
        first = next(i for i, a in enumerate(starts) if a >= len(prompt))
        ids = enc["input_ids"]
        want, _ = oracle.loglikelihood([(ids[:first], ids[first:])])[0]
        assert s["gold_logprob"] == pytest.approx(want, rel=1e-6, abs=1e-6)
        assert s["gold_min_margin"] is not None


def test_lm_eval_local_completions_loglikelihood(server, oracle):
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    lm = LocalCompletionsAPI(
        base_url=server.url + "/completions",
        model="tiny",
        tokenizer=str(oracle.loaded.path),
        tokenizer_backend="huggingface",
        max_retries=1,
    )
    pairs = [("The pass key is", " 71432"), ("Question: 2+2?\nAnswer:", " 4")]
    reqs = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    got = lm.loglikelihood(reqs, disable_tqdm=True)
    tok = oracle.tokenizer
    for (ctx, cont), (lp, greedy) in zip(pairs, got):
        want = oracle.loglikelihood([(tok.encode(ctx), tok.encode(cont))])[0]
        assert lp == pytest.approx(want[0], rel=1e-6, abs=1e-6) and greedy == want[1]


def test_seeded_sampling_with_n_choices_matches_the_engine(server, oracle):
    body = {
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 0.9,
        "top_k": 50,
        "seed": 77,
        "ignore_eos": True,
    }
    first = complete(server, n=3, **body)
    again = complete(server, n=3, **body)
    texts = [c["text"] for c in first["choices"]]
    assert texts == [c["text"] for c in again["choices"]] and [c["index"] for c in first["choices"]] == [
        0,
        1,
        2,
    ]
    assert len(set(texts)) > 1  # the choices are distinct samples
    assert first["usage"]["prompt_tokens"] == len(oracle.tokenizer.encode(PROMPT))
    for j, text in enumerate(texts):  # choice j is the engine's sample j of the same seed
        p = SamplingParams(
            max_new_tokens=6, temperature=0.9, top_k=50, seed=77, sample_index=j, ignore_eos=True
        )
        assert oracle.generate([PROMPT], p, use_tqdm=False)[0].text == text
    unseeded = {complete(server, **{**body, "seed": None})["choices"][0]["text"] for _ in range(3)}
    assert len(unseeded) > 1  # without a seed, each request draws its own


def test_chat_samples_n_choices_and_gives_log_probabilities(server, oracle):
    from evalkit.backends.local import encode_prompt

    messages = [{"role": "user", "content": "Say something"}]
    body = {"messages": messages, "max_tokens": 4, "temperature": 1.0, "seed": 5, "n": 2, "ignore_eos": True}
    r = httpx.post(server.url + "/chat/completions", json=body, timeout=60).json()
    assert [c["index"] for c in r["choices"]] == [0, 1]
    again = httpx.post(server.url + "/chat/completions", json=body, timeout=60).json()
    assert again["choices"] == r["choices"]  # seeded: the same two samples
    greedy = {"messages": messages, "max_tokens": 4, "logprobs": True, "top_logprobs": 2, "ignore_eos": True}
    (choice,) = httpx.post(server.url + "/chat/completions", json=greedy, timeout=60).json()["choices"]
    content = choice["logprobs"]["content"]
    ids = encode_prompt(oracle.tokenizer, messages)
    gen = oracle.generate([ids], SamplingParams(max_new_tokens=4, ignore_eos=True), use_tqdm=False)[0]
    (forced,) = oracle.forced_decode([(ids, gen.token_ids)])
    assert [c["token"] for c in content] == [oracle.tokenizer.decode([t]) for t in gen.token_ids]
    assert [c["logprob"] for c in content] == pytest.approx(forced.token_logprobs, rel=1e-6, abs=1e-6)
    assert all(
        len(c["top_logprobs"]) == 2 and c["top_logprobs"][0]["logprob"] == c["logprob"] for c in content
    )
    assert content[0]["bytes"] == list(content[0]["token"].encode())
    bad = httpx.post(server.url + "/chat/completions", json={**body, "n": 1, "top_logprobs": 2}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "top_logprobs"
