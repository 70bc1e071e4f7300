"""Start the HTTP server: the engine loop thread, the app, uvicorn on a socket we bind ourselves
(so `--port 0` gives an ephemeral port that is printed and optionally written to a file)."""

from __future__ import annotations

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


def make_uvicorn(config: Any, engine_loop: EngineLoop, shutdown_timeout_s: float) -> Any:
    """uvicorn's Server with evalkit's graceful shutdown: on SIGTERM/SIGINT stop accepting, let
    in-flight requests finish for `shutdown_timeout_s`, then abort what is left (clients get a
    503), so the process always exits; a second signal aborts at once (a third forces exit)."""
    import asyncio

    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:
                self._captured_signals.append(sig)
                self.should_exit = True
            elif not self._aborted:
                self._aborted = True
                engine_loop.abort_all("server shutting down")
            else:
                self.force_exit = True

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            deadline = asyncio.get_running_loop().call_later(shutdown_timeout_s, engine_loop.abort_all)
            try:
                await super().shutdown(sockets)
            finally:
                deadline.cancel()

    server = GracefulServer(config)
    server._aborted = False
    return server


def build(
    engine: Any, model_name: str, aliases: tuple[str, ...] = (), **guards: Any
) -> tuple[Any, EngineLoop]:
    """The app and its started engine loop; `guards` are create_app's `api_key`/`max_body_bytes`."""
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(
        loop,
        engine.tokenizer,
        make_params,
        model_name=model_name,
        describe=engine.describe(),
        max_model_len=engine.config.max_model_len,
        vocab_size=engine.arch.vocab_size,
        aliases=aliases,
        **guards,
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
        shutdown_timeout_s: float = 30.0,
        sock: socket.socket | None = None,
        api_key: str | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        import uvicorn

        self.sock = sock if sock is not None else bind(host, port)
        guards: dict[str, Any] = {"api_key": api_key}
        if max_body_bytes is not None:
            guards["max_body_bytes"] = max_body_bytes
        self.app, self.loop = build(engine, model_name, aliases, **guards)
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level=log_level,
            access_log=False,
            timeout_keep_alive=30,
            backlog=2048,
            # a backstop only: the engine loop aborts what is left at shutdown_timeout_s
            timeout_graceful_shutdown=int(shutdown_timeout_s) + 10,
        )
        self.uvicorn = make_uvicorn(config, self.loop, shutdown_timeout_s)
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
