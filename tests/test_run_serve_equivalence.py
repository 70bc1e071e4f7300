"""`evalkit serve` (a real subprocess) + `evalkit run --server` gives the same responses as
`evalkit run --model` in-process: GSM8K (--limit 20) and a long-context task (passkey)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.cli import main as cli
from evalkit.tasks.data import BUNDLED_DIR

REPO = Path(__file__).resolve().parents[1]
DATA = str(BUNDLED_DIR)
COMMON = ["--max-new-tokens", "16", "--no-progress", "--data-dir", DATA]
GSM8K = ["--tasks", "gsm8k", "--limit", "20"]
PASSKEY = ["--tasks", "passkey", "--lengths", "512", "--limit", "5"]


@pytest.fixture(scope="module")
def served(tiny_hybrid_ckpt, tmp_path_factory):
    """`evalkit serve --port 0` in a subprocess; yields (url, process)."""
    port_file = tmp_path_factory.mktemp("serve") / "port"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "evalkit",
        "serve",
        "--model",
        str(tiny_hybrid_ckpt),
        "--arm",
        "fp16",
        "--device",
        "cpu",
        "--port",
        "0",
        "--port-file",
        str(port_file),
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 180
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"evalkit serve did not start: {proc.stdout.read()[-2000:]}")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port_file.read_text()}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _samples(out: Path) -> dict:
    return {
        (s["task"], str(s["doc_id"]), s["length"]): s
        for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())
    }


def _same_answers(a: Path, b: Path, n: int, same_prompts: bool = True) -> None:
    sa, sb = _samples(a), _samples(b)
    assert len(sa) == n and sa.keys() == sb.keys()
    for k in sa:
        assert (sa[k]["prompt_hash"] == sb[k]["prompt_hash"]) == same_prompts, k
        assert sa[k]["response"] == sb[k]["response"], k
        assert sa[k]["correct"] == sb[k]["correct"] and sa[k]["n_generated"] == sb[k]["n_generated"], k
        assert sa[k]["error"] is None and sb[k]["error"] is None


@pytest.mark.parametrize(
    "task_args,n,tokenizer",
    [
        pytest.param(GSM8K, 20, True, id="gsm8k-5shot-limit20"),
        pytest.param(PASSKEY, 5, True, id="passkey-512"),
        # no tokenizer on the client: chat messages go to /v1/chat/completions and the server applies
        # the template (so the stored prompt is the messages, and its hash differs from the text's)
        pytest.param(GSM8K[:3] + ["3", "--apply-chat-template"], 3, False, id="gsm8k-chat-server-template"),
    ],
)
def test_served_run_equals_in_process_run(served, tiny_hybrid_ckpt, tmp_path, task_args, n, tokenizer):
    url, _ = served
    ckpt = str(tiny_hybrid_ckpt)
    remote, local = tmp_path / "remote", tmp_path / "local"
    model = ["--model", ckpt] if tokenizer else []
    assert (
        cli(
            [
                "run",
                "--server",
                url,
                *model,
                "--arm",
                "serve-fp16",
                "--arm-note",
                "evalkit serve --arm fp16",
                "--out",
                str(remote),
                *COMMON,
                *task_args,
            ]
        )
        == 0
    )
    assert (
        cli(
            [
                "run",
                "--model",
                ckpt,
                "--arm",
                "fp16",
                "--device",
                "cpu",
                "--out",
                str(local),
                *COMMON,
                *task_args,
            ]
        )
        == 0
    )
    _same_answers(remote, local, n, same_prompts=tokenizer)
    rm = json.loads((remote / "manifest.json").read_text())
    assert rm["backend"]["name"] == "openai" and rm["backend"]["model"] == ckpt
    assert rm["backend"]["server_versions"][url + "/v1"]["engine"]["state_dtype"] == "fp16"
    assert rm["backend_run"]["system_fingerprints"][0].startswith("fp_")
    lm = json.loads((local / "manifest.json").read_text())
    assert lm["arm"]["state_dtype"] == "fp16" and lm["backend"]["name"] == "local"


def test_serve_stops_cleanly_and_reports_batching(served):
    url, proc = served
    import httpx

    health = httpx.get(url + "/health", timeout=30).json()
    assert health["status"] == "ok" and health["finished"] > 0 and health["failed"] == 0
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-2000:]
    assert "mean batch size" in out
