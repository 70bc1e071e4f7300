"""Graceful shutdown of a real `evalkit serve` process (issue 16, item 2): with requests in flight
that would decode for a long time, SIGTERM or SIGINT stops the server within --shutdown-timeout
(the in-flight requests are aborted with a 503), it exits 0 and prints no traceback; a second
signal aborts at once, however long the timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest


def _start(ckpt, tmp_path, shutdown_timeout="1"):
    port_file = tmp_path / "port"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVALKIT_TEST_THREADS": "1"}
    cmd = [sys.executable, "-m", "evalkit", "serve", "--model", str(ckpt), "--arm", "fp32", "--port", "0"]
    cmd += [
        "--port-file",
        str(port_file),
        "--device",
        "cpu",
        "--max-num-seqs",
        "2",
        "--shutdown-timeout",
        "1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"evalkit serve did not start: {proc.communicate()}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


@pytest.mark.parametrize(
    "signals,shutdown_timeout",
    [([signal.SIGTERM], "1"), ([signal.SIGINT], "1"), ([signal.SIGTERM, signal.SIGTERM], "3600")],
    ids=["SIGTERM", "SIGINT", "second-SIGTERM-aborts-at-once"],
)
def test_a_signal_with_endless_requests_in_flight_exits_0_without_traceback(
    tiny_hybrid_ckpt, tmp_path, signals, shutdown_timeout
):
    proc, url = _start(tiny_hybrid_ckpt, tmp_path, shutdown_timeout)
    got: dict[str, object] = {}
    streaming = threading.Event()

    def stream() -> None:
        body = {"messages": [{"role": "user", "content": "Go on."}], "stream": True, "ignore_eos": True}
        lines = []
        with httpx.stream("POST", url + "/chat/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                lines.append(line)
                if len(lines) > 2:
                    streaming.set()
        got["stream"] = lines

    def plain() -> None:
        body = {"prompt": "Go on.", "ignore_eos": True, "max_tokens": 100_000}
        got["plain"] = httpx.post(url + "/completions", json=body, timeout=120)

    threads = [threading.Thread(target=f, daemon=True) for f in (stream, plain)]
    for t in threads:
        t.start()
    try:
        assert streaming.wait(120), "the stream never started"
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.5)  # (not a timing assertion: the second signal may come at any time)
        out, err = proc.communicate(timeout=120)  # before the fix: still decoding minutes later
    finally:
        if proc.poll() is None:
            proc.kill()
    for t in threads:
        t.join(30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert "stopped after" in out
    plain_reply = got["plain"]
    assert plain_reply.status_code == 503 and plain_reply.json()["error"]["message"]
    events = [x[len("data: ") :] for x in got["stream"] if x.startswith("data: ")]
    assert events[-1] == "[DONE]" and "error" in json.loads(events[-2])


def test_a_request_in_flight_at_sigterm_finishes_within_the_timeout(tiny_hybrid_ckpt, tmp_path):
    proc, url = _start(tiny_hybrid_ckpt, tmp_path, shutdown_timeout="3600")
    body = {"prompt": "Go on.", "ignore_eos": True, "max_tokens": 64, "stream": True}
    try:
        lines = []
        with httpx.stream("POST", url + "/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                lines.append(line)
                if len(lines) == 3:  # in flight: stop the server now
                    proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
    assert events[-1]["choices"][0]["finish_reason"] == "length"  # finished, not aborted
    assert proc.returncode == 0 and "Traceback" not in err
    assert "(0 aborted)" in out
