"""No secret stored, no code run unasked (issue 16, items 5 and 6, and the /v1/models shapes):
the API key reaches every endpoint of a key-protected server, never the run directory; tokenizer
code runs only with --trust-remote-code, which the manifest records."""

from __future__ import annotations

import json

import httpx
import pytest

from evalkit.backends.openai_remote import OpenAIBackend
from evalkit.cli import main as cli
from evalkit.errors import EvalkitError, InputError
from evalkit.serve.server import Server

KEY = "sk-test-do-not-store-4242"


@pytest.fixture(scope="module")
def keyed_server(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=4)
    with Server(engine, model_name="tiny", api_key=KEY) as srv:
        yield srv


def test_the_key_is_sent_to_v1_models_too(keyed_server):
    backend = OpenAIBackend([keyed_server.url], api_key=KEY, max_retries=0)
    assert backend.model == "tiny"
    with pytest.raises(EvalkitError, match="OPENAI_API_KEY"):
        OpenAIBackend([keyed_server.url], max_retries=0)


def test_a_keyed_run_never_writes_the_key(keyed_server, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr("sys.argv", ["evalkit", "run", "--api-key", KEY])
    args = ["run", "--server", keyed_server.url, "--model", "tiny", "--arm", "remote", "--api-key", KEY]
    args += ["--tasks", "gsm8k", "--limit", "1", "--max-new-tokens", "2", "--out", str(out), "--no-progress"]
    assert cli(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr()
    for f in out.iterdir():
        assert KEY not in f.read_text(), f.name
    assert KEY not in printed.out + printed.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["trust_remote_code"] is False
    assert "***" in manifest["command"]


@pytest.mark.parametrize("body", [[], None, ["tiny"], {"data": None}, "tiny"])
def test_odd_v1_models_answers_are_one_line_errors(monkeypatch, body):
    monkeypatch.setattr(
        "evalkit.backends.openai_remote.httpx.get",
        lambda *a, **k: httpx.Response(200, content=json.dumps(body).encode()),
    )
    with pytest.raises(EvalkitError, match="not an OpenAI model list"):
        OpenAIBackend(["http://127.0.0.1:9/v1"], max_retries=0)


def _remote_code_tokenizer(src, dst):
    import shutil

    shutil.copytree(src, dst)
    cfg = json.loads((dst / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg))
    (dst / "tokenization_evil.py").write_text("raise SystemExit('remote code ran')\n")
    return dst


def test_checkpoint_tokenizer_code_needs_trust_remote_code(tiny_hybrid_ckpt, tmp_path, monkeypatch):
    from evalkit.model.checkpoint import load_tokenizer

    path = _remote_code_tokenizer(tiny_hybrid_ckpt, tmp_path / "ckpt")
    with pytest.raises(InputError, match="--trust-remote-code"):
        load_tokenizer(path)
    seen = {}
    monkeypatch.setattr(
        "transformers.AutoTokenizer.from_pretrained", lambda p, **kw: seen.update(kw) or "tok"
    )
    assert load_tokenizer(path, trust_remote_code=True) == "tok" and seen["trust_remote_code"] is True


def test_the_server_tokenizer_does_not_trust_remote_code_by_default(monkeypatch):
    from evalkit.runner.setup import load_tokenizer

    seen = {}
    monkeypatch.setattr(
        "transformers.AutoTokenizer.from_pretrained", lambda p, **kw: seen.update(kw) or "tok"
    )
    load_tokenizer("some/tokenizer")
    assert seen["trust_remote_code"] is False
    load_tokenizer("some/tokenizer", trust_remote_code=True)
    assert seen["trust_remote_code"] is True


def test_lm_eval_bridge_tokenizer_does_not_trust_remote_code(monkeypatch):
    from evalkit.tasks import lm_eval_bridge

    seen = {}
    monkeypatch.setattr(
        "transformers.AutoTokenizer.from_pretrained", lambda p, **kw: seen.update(kw) or "tok"
    )
    lm_eval_bridge._tokenizer.cache_clear()
    lm_eval_bridge._tokenizer("x/y")
    assert seen["trust_remote_code"] is False
