"""A local stand-in for the three GitHub REST calls evalkit's PR comment makes: list a pull
request's comments, create one, edit one. `with FakeGitHub() as gh: gh.url, gh.comments`."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlparse

from .local_server import LocalServer

LIST_OR_CREATE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
EDIT = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")


class FakeGitHub(LocalServer):
    def __init__(self, token: str = "t0ken") -> None:
        self.token = token
        self.comments: dict[int, dict[str, Any]] = {}  # id -> {"pr", "repo", "body"}
        self.calls: list[tuple[str, str]] = []
        self._next = 1000
        super().__init__()

    @property
    def url(self) -> str:
        return self.base_url

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        gh = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {gh.token}":
                    self._reply(401, {"message": "Bad credentials"})
                    return False
                return True

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

            def do_GET(self) -> None:
                path = urlparse(self.path).path
                gh.calls.append(("GET", path))
                m = LIST_OR_CREATE.match(path)
                if not self._authorised():
                    return
                if not m:
                    return self._reply(404, {"message": "Not Found"})
                repo, pr = m.group(1), int(m.group(2))
                found = [
                    {"id": i, "body": c["body"]}
                    for i, c in gh.comments.items()
                    if c["repo"] == repo and c["pr"] == pr
                ]
                self._reply(200, found)

            def do_POST(self) -> None:
                path = urlparse(self.path).path
                gh.calls.append(("POST", path))
                m = LIST_OR_CREATE.match(path)
                if not self._authorised():
                    return
                if not m:
                    return self._reply(404, {"message": "Not Found"})
                gh._next += 1
                gh.comments[gh._next] = {
                    "repo": m.group(1),
                    "pr": int(m.group(2)),
                    "body": self._body()["body"],
                }
                self._reply(201, {"id": gh._next})

            def do_PATCH(self) -> None:
                path = urlparse(self.path).path
                gh.calls.append(("PATCH", path))
                m = EDIT.match(path)
                if not self._authorised():
                    return
                if not m or int(m.group(2)) not in gh.comments:
                    return self._reply(404, {"message": "Not Found"})
                gh.comments[int(m.group(2))]["body"] = self._body()["body"]
                self._reply(200, {"id": int(m.group(2))})

        return Handler
