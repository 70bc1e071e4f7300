"""The paired log-probability measure from a server: prompt log-probabilities (echo + logprobs) of
the reference answer, and a clear record when the server does not offer them (fake servers)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalkit.backends.base import GenRequest
from evalkit.backends.gold import from_prompt_logprobs
from evalkit.backends.openai_remote import GoldRefused, OpenAIBackend

PROMPT, GOLD = "The pass key is", " 123"
# the echoed prompt + answer + one generated token, as vLLM returns it
TOKENS = ["The", " pass", " key", " is", " 12", "3", "!"]
LOGPROBS = [None, -1.0, -2.0, -0.5, -0.25, -0.125, -3.0]
TOPS = [
    None,
    {" pass": -1.0, " x": -2.0},
    {" key": -2.0, " word": -1.5},
    {" is": -0.5, " was": -1.0},
    {" 12": -0.25, " 99": -1.75},
    {"3": -0.125, "4": -3.0},
    {"!": -3.0, ".": -0.1},
]


def _offsets(tokens):
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out


class FakeServer:
    """Completions with prompt log-probabilities when `echo_ok`, else 400 for echo requests."""

    def __init__(self, echo_ok: bool):
        self.echo_ok, self.bodies = echo_ok, []
        fake = self

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
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append(body)
                choice = {"index": 0, "text": " 123", "finish_reason": "stop"}
                if body.get("echo"):
                    if not fake.echo_ok:
                        return self._send(400, {"error": {"message": "echo is not supported"}})
                    assert body["prompt"] == PROMPT + GOLD and body["logprobs"] == 2
                    choice = {
                        "index": 0,
                        "text": PROMPT + GOLD + "!",
                        "finish_reason": "length",
                        "logprobs": {
                            "tokens": TOKENS,
                            "token_logprobs": LOGPROBS,
                            "top_logprobs": TOPS,
                            "text_offset": _offsets(TOKENS),
                        },
                    }
                usage = {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "text_completion",
                        "model": "fake",
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


def _ask(server, **kw):
    backend = OpenAIBackend([server.url], max_retries=0, sleep=lambda s: None)
    got = {}
    backend.generate([GenRequest(prompt=PROMPT, max_new_tokens=4, **kw)], lambda i, r: got.setdefault(i, r))
    backend.close()
    return got[0]


def test_a_server_with_prompt_logprobs_gives_the_answer_tokens_scores_and_margins():
    with FakeServer(echo_ok=True) as server:
        result = _ask(server, gold=GOLD)
    assert result.error is None and result.text == " 123"
    fields = result.gold.sample_fields()
    assert fields["gold_mode"] == "prompt" and fields["gold_error"] is None
    assert fields["gold_tokens"] == [" 12", "3"]  # not the prompt's, not the generated "!"
    assert fields["gold_token_logprobs"] == [-0.25, -0.125]
    assert fields["gold_logprob"] == pytest.approx(-0.375)
    assert fields["gold_margins"] == [1.5, 2.875] and fields["gold_min_margin"] == 1.5


def test_a_server_without_prompt_logprobs_stops_the_batch_with_one_line():
    with FakeServer(echo_ok=False) as server:
        with pytest.raises(GoldRefused, match="refused prompt log-probabilities.*echo is not supported"):
            _ask(server, gold=GOLD)
    assert len(server.bodies) == 2  # the answer, then one refused echo request: no retries, no others


def test_no_gold_no_extra_request():
    with FakeServer(echo_ok=True) as server:
        result = _ask(server)
    assert result.gold is None and len(server.bodies) == 1


def test_parsing_edge_cases():
    assert "no prompt log-probabilities" in from_prompt_logprobs(None, 0, 1).error
    lp = {"tokens": ["a", " b"], "token_logprobs": [None, -1.0], "text_offset": [0, 1], "top_logprobs": None}
    score = from_prompt_logprobs(lp, 1, 3)
    assert score.token_logprobs == [-1.0] and score.margins == [None] and score.min_margin is None
    assert "no answer tokens" in from_prompt_logprobs(lp, 5, 9).error


def test_run_with_gold_logprob_against_a_refusing_server_exits_2_with_one_line(
    tiny_hybrid_ckpt, tmp_path, capsys
):
    from evalkit.cli import main as cli
    from evalkit.tasks.data import BUNDLED_DIR

    args = ["run", "--model", str(tiny_hybrid_ckpt), "--arm", "x", "--tasks", "passkey", "--lengths", "512"]
    args += ["--limit", "3", "--no-progress", "--data-dir", str(BUNDLED_DIR), "--out", str(tmp_path / "r")]
    with FakeServer(echo_ok=False) as server:
        rc = cli([*args, "--server", server.url, "--gold-logprob", "--concurrency", "1"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "--gold-logprob: the server refused" in last and "Traceback" not in err
    assert sum(bool(b.get("echo")) for b in server.bodies) == 1  # stopped at the first refusal
