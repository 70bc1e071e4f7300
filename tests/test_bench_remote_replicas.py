"""scripts/bench_remote_replicas.py, its CPU smoke path end to end: one `evalkit run --server ...`
against one and then two `evalkit serve` processes of a tiny checkpoint; both rows reported, the
two-server samples identical to the one-server ones, every server used and gone afterwards. No
timing is asserted (the CI box is slow and shared)."""

from __future__ import annotations

import json
import os
import socket

from helpers.scripts import load_script

from evalkit.tasks.data import BUNDLED_DIR


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    return True


def test_cpu_smoke_one_and_two_servers(tiny_hybrid_ckpt, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the servers' and runs' engines: one thread each
    script = load_script("bench_remote_replicas")
    pids: list[int] = []
    popen = script.subprocess.Popen

    def recording_popen(cmd, *a, **k):
        proc = popen(cmd, *a, **k)
        if "evalkit" in cmd:  # `python -m evalkit serve|run` (not git)
            pids.append(proc.pid)
        return proc

    monkeypatch.setattr(script.subprocess, "Popen", recording_popen)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--model", str(tiny_hybrid_ckpt), "--replicas", "1,2"]
    argv += ["--limit", "4", "--tasks", "gsm8k", "--max-new-tokens", "8", "--repeats", "1"]
    argv += ["--data-dir", str(BUNDLED_DIR), "--start-timeout", "180"]
    assert script.main(argv) == 0

    report = json.loads((tmp_path / "bench_remote_replicas.json").read_text())
    assert set(report["rows"]) == {"1", "2"} and report["baseline_k"] == 1
    for k, row in report["rows"].items():
        assert "error" not in row, row.get("error")
        assert len(row["ports"]) == int(k) and len(row["runs"]) == 1
        assert row["runs"][0]["samples"] == 4 and row["runs"][0]["errors"] == 0
        assert row["samples_differing"] == 0
        assert row["wall_s"] > 0 and row["startup_s"] > 0 and row["questions_per_s"] > 0
        assert row["server_exit_codes"] == [0] * int(k)  # a clean SIGTERM shutdown
        assert sum(row["requests_per_server"]) == 4
    assert report["rows"]["1"]["speedup"] == 1.0
    assert all(n > 0 for n in report["rows"]["2"]["requests_per_server"])  # both replicas answered
    assert report["environment"]["cpu_count"] and report["git"]["commit"]
    md = (tmp_path / "bench_remote_replicas.md").read_text()
    assert "| 1 |" in md and "| 2 |" in md and "0 of 4" in md

    # nothing left behind: 3 servers and 2 runs started, all exited, their ports closed
    assert len(pids) == 3 + 2
    assert not any(_alive(p) for p in pids)
    ports = report["rows"]["1"]["ports"] + report["rows"]["2"]["ports"]
    assert not any(_accepts(p) for p in ports)
    assert (tmp_path / "k2" / "server1.log").read_text().count("stopped after") == 1


def test_differing_counts_changed_and_missing_questions():
    script = load_script("bench_remote_replicas")
    a = {
        ("gsm8k", "0", None): ("h0", "x", 8, "length", None),
        ("gsm8k", "1", None): ("h1", "y", 8, "length", None),
    }
    b = {**a, ("gsm8k", "1", None): ("h1", "z", 8, "length", None)}
    assert script.differing(a, a) == 0 and script.differing(a, b) == 1
    assert script.differing(a, {k: a[k] for k in list(a)[:1]}) == 1  # a question missing from a run
