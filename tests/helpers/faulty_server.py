"""A real local OpenAI-compatible HTTP server that misbehaves on purpose.

Each distinct prompt gets a fate (see `cycle_plan`, which deals them out in turn as prompts first
arrive, so every kind occurs in any run of 10+ prompts): answered at once, answered after one
failure of a given kind (500, 429, a reply slower than the client's timeout, a dropped
connection, malformed JSON, a 200 without `choices`), or never answered (always 500). The
answer is a pure function of the prompt, so a test knows what every question must end up with;
`fate` records what each prompt got. It listens on 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from .local_server import LocalServer

FAULTS = ("500", "429", "slow", "drop", "malformed", "noshape")


def prompt_key(body: dict[str, Any]) -> str:
    prompt = body.get("messages", body.get("prompt"))
    return hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()


def answer_for(key: str) -> str:
    """The server's (deterministic) answer; it ignores `stop`, so clients must cut at it."""
    n = int(key[:6], 16) % 100
    return f" The answer is {n}.\n#### {n}\n\nQuestion: junk after the stop string"


CYCLE = ("ok", "dead", *FAULTS, "ok")


def cycle_plan(fate: str, attempt: int) -> str:
    """What attempt `attempt` (0-based) of a prompt with this fate gets: 'ok' or a fault kind."""
    if fate == "dead":
        return "500"  # never answered: must end as a recorded error
    return fate if attempt == 0 else "ok"


def expected_outcome(fate: str) -> str:
    return "error" if fate == "dead" else "answer"


class FaultyServer(LocalServer):
    """`with FaultyServer() as s: s.url` -> http://127.0.0.1:PORT/v1."""

    def __init__(
        self,
        plan: Callable[[str, int], str] = cycle_plan,
        *,
        slow_s: float = 2.0,
        delay_s: float = 0.0,
        model: str = "faulty-model",
    ) -> None:
        self.plan = plan
        self.slow_s = slow_s
        self.delay_s = delay_s
        self.model = model
        self.attempts: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.fate: dict[str, str] = {}  # prompt key -> fate dealt from CYCLE at first sight
        self.prompts: dict[str, Any] = {}  # prompt key -> the prompt (text, ids or messages)
        self.log: list[tuple[str, int, str]] = []
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        super().__init__()

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (timeout): expected here

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    body = {
                        "object": "list",
                        "data": [{"id": server.model, "object": "model", "owned_by": "faulty"}],
                    }
                    self._send(200, json.dumps(body).encode())
                elif self.path == "/version":
                    self._send(200, b'{"version": "faulty-1.0"}')
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                key = prompt_key(body)
                with server._lock:
                    attempt = server.attempts[key]
                    server.attempts[key] += 1
                    if key not in server.fate:
                        server.fate[key] = CYCLE[len(server.fate) % len(CYCLE)]
                        server.prompts[key] = body.get("messages", body.get("prompt"))
                    fate = server.plan(server.fate[key], attempt)
                with server._lock:
                    server.log.append((key, attempt, fate))
                    server.bodies.append(body)
                if fate == "500":
                    return self._send(500, b'{"error": {"message": "internal error (on purpose)"}}')
                if fate == "400":
                    return self._send(400, b'{"error": {"message": "bad request (on purpose)"}}')
                if fate == "429":
                    return self._send(429, b'{"error": {"message": "slow down (on purpose)"}}')
                if fate == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fate == "malformed":
                    return self._send(200, b'{"id": "cmpl-x", "choices": [{"text": ')
                if fate == "noshape":
                    return self._send(200, b'{"id": "cmpl-x", "object": "text_completion"}')
                if fate == "slow":
                    time.sleep(server.slow_s)
                elif server.delay_s:
                    time.sleep(server.delay_s)
                text = answer_for(key)
                usage = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
                if "messages" in body:
                    choice = {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length",
                    }
                    obj = "chat.completion"
                else:
                    choice = {"index": 0, "text": text, "finish_reason": "length"}
                    obj = "text_completion"
                reply = {
                    "id": "cmpl-" + key[:8],
                    "object": obj,
                    "created": 0,
                    "model": server.model,
                    "system_fingerprint": "fp_faulty",
                    "choices": [choice],
                    "usage": usage,
                }
                with server._lock:
                    server.answered[key] += 1
                self._send(200, json.dumps(reply).encode())

        return Handler
