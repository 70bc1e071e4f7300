"""The server's configuration in the record (the state dtype, chunked-prefill size and prefix
caching a server reports: SGLang's /get_server_info, vLLM's /version and model card, evalkit
serve's /version), and the checkpoint's declared state dtype beside the arm's."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evalkit.backends.openai_remote import OpenAIBackend
from evalkit.backends.server_config import differs_from_arm, server_config
from evalkit.cli import main as cli
from evalkit.declared_state import arm_note, declared_state, dtype_name, read_declared_state
from evalkit.tasks.data import BUNDLED_DIR

SGLANG_INFO = {"version": "0.5.2", "mamba_ssm_dtype": "float32", "chunked_prefill_size": 8192,
               "disable_radix_cache": False, "dtype": "bfloat16"}  # fmt: skip
CARD = {"id": "m", "object": "model", "max_model_len": 4096}


class FakeServer:
    """GET routes -> fixed JSON (404 otherwise); completions answer " 1"."""

    def __init__(self, routes: dict[str, object]):
        routes = {"/v1/models": {"object": "list", "data": [CARD]}, **routes}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path in routes:
                    return self._send(200, routes[self.path])
                self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                choice = {"index": 0, "text": " 1", "finish_reason": "stop"}
                usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "text_completion",
                        "model": "m",
                        "choices": [choice],
                        "usage": usage,
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_sglang_server_info_is_recorded():
    with FakeServer({"/get_server_info": SGLANG_INFO}) as srv:
        backend = OpenAIBackend([srv.url], max_retries=0, sleep=lambda s: None)
        desc = backend.describe()
        backend.close()
    cfg = desc["server_config"][srv.url]
    assert desc["server_info"][srv.url] == SGLANG_INFO
    assert cfg["state_dtype"] == "fp32" and cfg["state_dtype_raw"] == "float32"
    assert cfg["chunked_prefill_size"] == 8192 and cfg["prefix_caching"] is True
    assert cfg["keys"] == {"state_dtype": "mamba_ssm_dtype", "chunked_prefill_size": "chunked_prefill_size",
                           "prefix_caching": "disable_radix_cache"}  # fmt: skip
    assert differs_from_arm(cfg, "fp16") == "the server reports mamba_ssm_dtype=float32 but the arm is fp16"
    assert differs_from_arm(cfg, "fp32") is None


def test_a_server_that_says_nothing_records_unknowns():
    with FakeServer({"/version": {"version": "0.11.0"}}) as srv:  # vLLM: no configuration exposed
        backend = OpenAIBackend([srv.url], max_retries=0, sleep=lambda s: None)
        cfg = backend.describe()["server_config"][srv.url]
        backend.close()
    assert (
        cfg["state_dtype"] is None and cfg["chunked_prefill_size"] is None and cfg["prefix_caching"] is None
    )


def test_evalkit_serve_version_and_vllm_style_settings():
    evalkit_version = {
        "version": "evalkit 1",
        "engine": {"state_dtype": "fp16", "batch_invariance": {"prefill_chunk_size": 512}},
    }
    cfg = server_config(None, evalkit_version, CARD)
    assert cfg["state_dtype"] == "fp16" and cfg["chunked_prefill_size"] == 512
    vllm_like = {
        "mamba_ssm_cache_dtype": "auto",
        "max_num_batched_tokens": 2048,
        "enable_prefix_caching": False,
    }
    cfg = server_config(vllm_like)
    assert cfg["state_dtype"] is None and cfg["state_dtype_raw"] == "auto"  # "auto": the model's dtype
    assert cfg["chunked_prefill_size"] == 2048 and cfg["prefix_caching"] is False


def test_declared_state_dtype_of_a_checkpoint(tmp_path):
    assert dtype_name("torch.bfloat16") == "bf16" and dtype_name("auto") is None
    assert declared_state({"text_config": {"mamba_ssm_cache_dtype": "float32"}})["state_dtype"] == "fp32"
    assert read_declared_state(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({"mamba_ssm_cache_dtype": "float16"}))
    note = arm_note(read_declared_state(tmp_path), "fp16")
    assert note == {"key": "mamba_ssm_cache_dtype", "value": "float16", "state_dtype": "fp16",
                    "arm_state_dtype": "fp16", "arm_differs": False}  # fmt: skip
    assert arm_note(read_declared_state(tmp_path), "bf16")["arm_differs"] is True


def test_a_local_run_records_and_notes_a_differing_declared_dtype(tiny_hybrid_ckpt, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_hybrid_ckpt, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "mamba_ssm_cache_dtype": "float32"}))
    out = tmp_path / "run"
    args = ["run", "--model", str(ckpt), "--arm", "fp16", "--device", "cpu", "--tasks", "passkey"]
    args += ["--lengths", "512", "--limit", "1", "--max-new-tokens", "2", "--no-progress"]
    assert cli([*args, "--data-dir", str(BUNDLED_DIR), "--out", str(out)]) == 0
    declared = json.loads((out / "manifest.json").read_text())["model"]["declared_state"]
    assert declared["state_dtype"] == "fp32" and declared["arm_differs"] is True
    assert (
        "declares mamba_ssm_cache_dtype=float32; this arm stores the state as fp16" in capsys.readouterr().err
    )


def test_a_remote_run_notes_a_server_reporting_another_state_dtype(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeServer({"/get_server_info": SGLANG_INFO}) as srv:
        args = [
            "run",
            "--server",
            srv.url,
            "--arm",
            "fp16",
            "--tasks",
            "gsm8k",
            "--limit",
            "1",
            "--no-progress",
        ]
        rc = cli([*args, "--data-dir", str(BUNDLED_DIR), "--out", str(out), "--max-new-tokens", "4"])
    assert rc == 0
    assert "reports mamba_ssm_dtype=float32 but the arm is fp16" in capsys.readouterr().err
    backend = json.loads((out / "manifest.json").read_text())["backend"]
    assert backend["server_config"][srv.url]["state_dtype"] == "fp32"
