"""A local OpenAI-compatible server with a prefix cache, which may answer differently from it.

A prompt seen since the last flush is "cached". With `cache_dtype_bug`, a cached prompt's answer
is computed from states rounded to another dtype, as once in SGLang: every log-probability moves
and every `flip_every`-th question's greedy text changes. The answer depends only on the prompt's
last `QUESTION_CHARS` characters (the question), as a model's mostly does, so a unique prefix
in front of a prompt leaves it alone. `flush_path` names the endpoint that empties the cache
(vLLM's `/reset_prefix_cache`, SGLang's `/flush_cache`), None for a server without one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from .local_server import LocalServer

QUESTION_CHARS = 200


class CachedServer(LocalServer):
    def __init__(
        self, *, cache_dtype_bug: bool, flush_path: str | None = "/reset_prefix_cache", flip_every: int = 3
    ) -> None:
        self.cache_dtype_bug = cache_dtype_bug
        self.flush_path = flush_path
        self.flip_every = flip_every
        self.cache: set[str] = set()
        self.flushes = 0
        self.requests: list[tuple[str, bool]] = []  # (prompt, was it cached)
        self._lock = threading.Lock()
        super().__init__()

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    @staticmethod
    def _key(prompt: str) -> bytes:
        return hashlib.sha256(prompt[-QUESTION_CHARS:].encode()).digest()

    def flips(self, prompt: str) -> bool:
        """Whether the bug changes this prompt's greedy text when it is cached."""
        return self.cache_dtype_bug and self._key(prompt)[0] % self.flip_every == 0

    def answer(self, prompt: str, cached: bool, max_tokens: int) -> dict[str, Any]:
        key = self._key(prompt)
        tokens = [f" t{(key[i % 32] + i) % 50}" for i in range(max_tokens)]
        logprobs = [-(key[i % 32] / 255.0) - 0.01 for i in range(max_tokens)]
        if cached and self.cache_dtype_bug:
            logprobs = [x - 3e-3 for x in logprobs]  # the states' rounding moves every token a little
            if self.flips(prompt):
                tokens[-1] = " flipped"
        return {
            "text": "".join(tokens),
            "logprobs": {
                "tokens": tokens,
                "token_logprobs": logprobs,
                "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs)],
                "text_offset": [0] * len(tokens),
            },
            "finish_reason": "length",
            "index": 0,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "cached-model", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if server.flush_path is not None and self.path == server.flush_path:
                    with server._lock:
                        server.cache.clear()
                        server.flushes += 1
                    return self._send(200, {"status": "flushed"})
                if self.path != "/v1/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                prompt = body["prompt"]
                with server._lock:
                    cached = prompt in server.cache
                    server.cache.add(prompt)
                    server.requests.append((prompt, cached))
                choice = server.answer(prompt, cached, int(body.get("max_tokens", 16)))
                usage = {"prompt_tokens": 10, "completion_tokens": len(choice["logprobs"]["tokens"])}
                reply = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "cached-model"}
                self._send(200, {**reply, "choices": [choice], "usage": {**usage, "total_tokens": 10}})

        return Handler
