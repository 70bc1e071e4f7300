"""The user-facing commands on a tiny Qwen3-Next checkpoint: `evalkit run` (and its resume),
`evalkit drift`, `evalkit serve`'s API and the lm-eval model `evalkit` all run GDN models."""

from __future__ import annotations

import json
from types import SimpleNamespace

import openai
import pytest
from gdn_fixtures import tiny_gdn

from evalkit.cli import main as cli


@pytest.fixture(scope="module")
def ckpt(request):
    return tiny_gdn(request, "qwen3_next")


def test_run_and_resume(ckpt, tmp_path, capsys):
    args = ["run", "--model", str(ckpt), "--arm", "fp16", "--tasks", "passkey", "--lengths", "1k"]
    args += ["--limit", "2", "--out", str(tmp_path / "run"), "--no-progress"]
    assert cli(args) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["arm"]["state_dtype"] == "fp16" and manifest["model"]["config_hash"]
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["error"] is None for x in lines)
    assert cli(args) == 0
    assert "0 new samples (2 already on disk)" in capsys.readouterr().out


def test_drift(ckpt, tmp_path):
    out = tmp_path / "drift"
    args = ["drift", "--model", str(ckpt), "--length", "200", "--generate", "8", "--prompt-length", "64"]
    assert cli(args + ["--chunk-size", "64", "--out", str(out), "--no-plots", "--no-progress"]) == 0
    states = json.loads((out / "states.json").read_text())
    assert states and {row["layer"] for row in states} == {0, 1, 2}  # the GDN layers


def test_serve_completion_equals_the_engine(ckpt):
    from evalkit.backends.local import encode_prompt, make_params
    from evalkit.engine import LLMEngine
    from evalkit.serve.server import Server

    served = LLMEngine(str(ckpt), state_dtype="fp16", device="cpu")
    oracle = LLMEngine(served.loaded, state_dtype="fp16", device="cpu")
    with Server(served, model_name="tiny-gdn") as srv:
        client = openai.OpenAI(base_url=srv.url, api_key="x", max_retries=0)
        r = client.completions.create(model="tiny-gdn", prompt="Question: 2+2?", max_tokens=12, temperature=0)
    ids = encode_prompt(oracle.tokenizer, "Question: 2+2?")
    want = oracle.generate([ids], [make_params(max_tokens=12, stop=[])], use_tqdm=False)[0]
    assert r.choices[0].text == want.text and r.usage.completion_tokens == want.n_generated


def test_lm_eval_model(ckpt):
    from evalkit.interop.lm_eval_model import EvalkitLM

    lm = EvalkitLM(pretrained=str(ckpt), state_dtype="bf16", device="cpu", max_gen_toks=8)
    reqs = [SimpleNamespace(args=("Natalia sold clips", " to 48 friends")), SimpleNamespace(args=("A", " b"))]
    (lp, _), (lp2, _) = lm.loglikelihood(reqs)
    assert lp < 0 and lp2 < 0
    (text,) = lm.generate_until([SimpleNamespace(args=("Weng earns", {"until": ["\n\n"]}))])
    assert isinstance(text, str)
