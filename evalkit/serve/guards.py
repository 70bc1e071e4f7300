"""ASGI guards in front of the app: an API key (as vLLM's `--api-key`: `/v1/*` needs
`Authorization: Bearer KEY`) and a request-body size limit, both answered in OpenAI's JSON error
format before any JSON is parsed or any text is tokenized.

With a key, what stays public: `/health` (a load balancer probes it without credentials) and
`/version` reduced to the evalkit version (the model path and fingerprints only with the key).
`/docs`, `/redoc`, `/openapi.json` and `/metrics` need the key, as `/v1/*` does."""

from __future__ import annotations

import hmac
import json
from typing import Any

from evalkit.serve.protocol import APIError

Scope = dict[str, Any]
# besides /v1/*: the API's description and the metrics reveal the model and the traffic
PROTECTED = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/metrics"})


async def _send_error(send: Any, err: APIError, extra_headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += list(extra_headers)
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


class Guards:
    """Wraps an ASGI app: checks the API key on `/v1/*`, then reads the body (at most
    `max_body_bytes`, else 413) and replays it to the app."""

    def __init__(self, app: Any, *, api_key: str | None, max_body_bytes: int) -> None:
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes

    def authorized(self, scope: Scope) -> bool:
        """`Authorization: Bearer KEY` exactly (the scheme is required, as vLLM requires it)."""
        scheme, _, given = (_header(scope, b"authorization") or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.api_key.encode())  # type: ignore[union-attr]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.api_key is not None:
            authorized = self.authorized(scope)
            scope.setdefault("state", {})["authorized"] = authorized
            path = scope.get("path", "")
            if not authorized and (path.startswith("/v1") or path in PROTECTED):
                err = APIError(401, "missing or incorrect API key (send `Authorization: Bearer KEY`)")
                return await _send_error(send, err, [(b"www-authenticate", b"Bearer")])
        too_big = APIError(
            413,
            f"the request body exceeds {self.max_body_bytes} bytes (evalkit serve --max-body-mb)",
        )
        declared = _header(scope, b"content-length")
        if declared and declared.isdigit() and int(declared) > self.max_body_bytes:
            return await _send_error(send, too_big)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending its body
                return
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return await _send_error(send, too_big)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> Any:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)
