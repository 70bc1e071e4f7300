"""Start the HTTP server: the engine loop thread, the app, uvicorn on a socket we bind ourselves
(so `--port 0` gives an ephemeral port that is printed and optionally written to a file)."""

from __future__ import annotations

import functools
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from evalkit.backends.local import make_params
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def build(engine: Any, model_name: str, aliases: tuple[str, ...] = ()) -> tuple[Any, EngineLoop]:
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(
        loop,
        engine.tokenizer,
        functools.partial(make_params, engine),
        model_name=model_name,
        describe=engine.describe(),
        max_model_len=engine.config.max_model_len,
        vocab_size=engine.arch.vocab_size,
        aliases=aliases,
    )
    return app, loop


class Server:
    """uvicorn over the app; `start()` in a thread (tests) or `run()` in the foreground (CLI)."""

    def __init__(
        self,
        engine: Any,
        *,
        model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        aliases: tuple[str, ...] = (),
        log_level: str = "warning",
    ) -> None:
        import uvicorn

        self.app, self.loop = build(engine, model_name, aliases)
        self.sock = bind(host, port)
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level=log_level, access_log=False, timeout_keep_alive=30, backlog=2048
        )
        self.uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def write_port_file(self, path: str | os.PathLike[str]) -> None:
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(str(self.port))
        os.replace(tmp, path)

    def run(self) -> None:
        """Serve until SIGINT/SIGTERM, then shut down gracefully and return (exit status 0).

        uvicorn re-raises the signal it caught once it has shut down; a no-op handler installed
        here receives it, so the caller can still report and exit normally."""
        main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, lambda *_: None) for sig in STOP_SIGNALS} if main else {}
        try:
            self.uvicorn.run(sockets=[self.sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.loop.stop()

    def start(self, timeout_s: float = 30.0) -> Server:
        import time

        self.uvicorn.config.install_signal_handlers = False  # not the main thread
        self._thread = threading.Thread(target=self.run, daemon=True, name="evalkit-serve")
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("evalkit serve did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
        self.loop.stop()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
