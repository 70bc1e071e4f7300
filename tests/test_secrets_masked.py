"""No secret reaches a run's records or its log (issue 43, security item 1): an API key given in
`--config` and credentials inside a `--server` URL are masked in manifest.json, samples.jsonl and
what the command prints, by the one helper `evalkit.redact`."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main as cli
from evalkit.redact import mask_manifest, mask_secrets, mask_text, redact_command
from evalkit.serve.server import Server
from evalkit.store.writer import RunWriter

KEY = "sk-config-file-key-9731"
PASSWORD = "url-password-5518"


@pytest.fixture(scope="module")
def open_server(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=4)
    with Server(engine, model_name="tiny") as srv:
        yield srv


def test_a_config_file_key_and_url_credentials_are_written_nowhere(
    open_server, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    url = open_server.url.replace("://", f"://alice:{PASSWORD}@")
    config = tmp_path / "run.yaml"
    config.write_text(f"api-key: {KEY}\nserver: [{url}]\nmodel: tiny\narm: remote\n")
    argv = ["run", "--config", str(config), "--server", url, "--tasks", "gsm8k", "--limit", "1"]
    argv += ["--max-new-tokens", "2", "--out", str(out), "--no-progress"]
    monkeypatch.setattr("sys.argv", ["evalkit", *argv])
    assert cli(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr()
    for f in out.iterdir():
        text = f.read_text()
        assert KEY not in text and PASSWORD not in text, f.name
    assert KEY not in printed.out + printed.err and PASSWORD not in printed.out + printed.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_file"]["options"]["api-key"] == "***"
    assert all(u.startswith("http://***@127.0.0.1") for u in manifest["backend"]["base_urls"])


def test_an_unreachable_server_with_credentials_is_a_masked_one_line_error(capsys, tmp_path):
    argv = ["run", "--server", f"http://bob:{PASSWORD}@127.0.0.1:9", "--arm", "x", "--max-retries", "0"]
    assert cli([*argv, "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert PASSWORD not in err and "http://***@127.0.0.1:9" in err and len(err.strip().splitlines()) == 1


def test_sample_errors_quoting_a_url_are_masked(tmp_path):
    with RunWriter.open(tmp_path / "run", {"command": ["evalkit", "run", "--api-key", KEY]}) as w:
        w.append(
            {
                "task": "t",
                "doc_id": 0,
                "length": None,
                "prompt_hash": "h",
                "target": "1",
                "response": "",
                "correct": {},
                "error": f"http://u:{PASSWORD}@h:1/v1: HTTP 503",
            }
        )
    for name in ("manifest.json", "samples.jsonl"):
        text = (tmp_path / "run" / name).read_text()
        assert KEY not in text and PASSWORD not in text, name


@pytest.mark.parametrize(
    "text, masked",
    [
        ("http://user:pw@host:8000/v1", "http://***@host:8000/v1"),
        ("https://TOKEN@example.com", "https://***@example.com"),
        ("cannot reach http://a:b@h/v1 (x@y)", "cannot reach http://***@h/v1 (x@y)"),
        ("mail me at a@b.c", "mail me at a@b.c"),
        ("http://host/path@v2", "http://host/path@v2"),
    ],
)
def test_mask_text(text, masked):
    assert mask_text(text) == masked


def test_mask_secrets_and_commands():
    value = {
        "api_key": "k",
        "API-Key": "k2",
        "password": None,
        "nested": [{"token": "t", "url": "http://u:p@h"}],
    }
    assert mask_secrets(value) == {
        "api_key": "***",
        "API-Key": "***",
        "password": None,
        "nested": [{"token": "***", "url": "http://***@h"}],
    }
    cmd = ["evalkit", "run", "--api-key", "k", "--api-key=k", "--server", "http://u:p@h"]
    assert redact_command(cmd) == [
        "evalkit",
        "run",
        "--api-key",
        "***",
        "--api-key=***",
        "--server",
        "http://***@h",
    ]
    resumed = mask_manifest({"command": cmd, "resumes": [{"command": cmd}]})
    assert resumed["command"] == resumed["resumes"][0]["command"] == redact_command(cmd)
