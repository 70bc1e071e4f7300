"""A threaded HTTP server on a free localhost port, served from a background thread while used as a
context manager: the base of the tests' stand-ins for remote services."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

_S = TypeVar("_S", bound="LocalServer")


class LocalServer:
    """Subclasses define `_handler()` (the request handler class, closing over the instance) and call
    `super().__init__()` once the state the handler reads is set."""

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def __enter__(self: _S) -> _S:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError
