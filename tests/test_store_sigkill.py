"""A producer killed with SIGKILL mid-run and restarted yields exactly the uninterrupted run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalkit.store import load_run

PRODUCER = Path(__file__).parent / "data" / "compare" / "producer.py"
N_DOCS = 60  # 120 samples


def _run(out: Path, pause: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(PRODUCER), str(out), str(N_DOCS), str(pause)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    clean = tmp_path / "clean"
    assert _run(clean, 0.0).returncode == 0

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, str(PRODUCER), str(killed), str(N_DOCS), "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while _lines(killed / "samples.jsonl") < 30 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    written = _lines(killed / "samples.jsonl")
    assert 30 <= written < 2 * N_DOCS, "the kill must land mid-way"

    resumed = _run(killed, 0.0)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == f"resumed with {written}"  # complete lines only

    assert (killed / "samples.jsonl").read_bytes() == (clean / "samples.jsonl").read_bytes()
    run = load_run(killed)
    keys = [(s["doc_id"], s["length"]) for s in run.samples]
    assert len(keys) == len(set(keys)) == 2 * N_DOCS
    assert (killed / "summary.json").read_text() == (clean / "summary.json").read_text()
    assert len(run.manifest["resumes"]) == 1 and run.manifest["finished_at"]


def test_a_torn_last_line_is_dropped_and_redone(tmp_path):
    def produce(out):
        return subprocess.run(
            [sys.executable, str(PRODUCER), str(out), "3", "0"], capture_output=True, text=True, timeout=60
        )

    clean, out = tmp_path / "clean", tmp_path / "run"
    produce(clean)
    produce(out)
    path = out / "samples.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])  # killed mid-write of line 5
    res = produce(out)
    assert res.returncode == 0, res.stderr
    assert "dropped a truncated last line" in res.stderr
    assert res.stdout.splitlines()[0] == "resumed with 4"
    assert path.read_bytes() == (clean / "samples.jsonl").read_bytes()
