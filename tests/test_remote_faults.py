"""`evalkit run --server` against a real local server that misbehaves on purpose (500s, 429s,
replies slower than the timeout, dropped connections, malformed JSON): every question ends
answered or with a recorded error, none lost or duplicated, and a SIGKILLed run resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.faulty_server import FAULTS, FaultyServer, answer_for

from evalkit.backends.openai_remote import truncate_at_stop
from evalkit.cli import main as cli
from evalkit.store import prompt_hash
from evalkit.tasks.data import BUNDLED_DIR

REPO = Path(__file__).resolve().parents[1]
DATA = str(BUNDLED_DIR)
STOP = ["Question:", "</s>", "<|im_end|>"]  # gsm8k's `until`
LIMIT = 20


def _args(url: str, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--server",
        url,
        "--arm",
        "faulty",
        "--arm-note",
        "on purpose",
        "--tasks",
        "gsm8k",
        "--limit",
        str(LIMIT),
        "--data-dir",
        DATA,
        "--out",
        str(out),
        "--timeout",
        "0.5",
        "--max-retries",
        "2",
        "--concurrency",
        "4",
        "--no-progress",
        *extra,
    ]


def _samples(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]


def _check_outcomes(srv: FaultyServer, samples: list[dict]) -> int:
    """Each sample is what the server's fate for its prompt says; returns the error count."""
    by_hash = {prompt_hash(p): k for k, p in srv.prompts.items()}
    errors = 0
    for s in samples:
        key = by_hash[s["prompt_hash"]]
        if srv.fate[key] == "dead":
            errors += 1
            assert s["error"] and "HTTP 500" in s["error"] and s["correct"] == {}
        else:
            assert s["error"] is None, s["error"]
            assert s["response"] == truncate_at_stop(answer_for(key), STOP)[0]
            assert set(s["correct"]) == {"exact_match,strict-match", "exact_match,flexible-extract"}
    return errors


def test_every_question_ends_answered_or_with_a_recorded_error(tmp_path, capsys):
    out = tmp_path / "run"
    with FaultyServer(slow_s=1.0) as srv:
        assert cli(_args(srv.url, out)) == 0
    samples = _samples(out)
    assert sorted(s["doc_id"] for s in samples) == list(range(LIMIT))  # none lost, none duplicated
    assert set(srv.fate.values()) == {"ok", "dead", *FAULTS}
    errors = _check_outcomes(srv, samples)
    assert errors == list(srv.fate.values()).count("dead") > 0
    summary = json.loads((out / "summary.json").read_text())
    cell = summary["gsm8k"]["exact_match,strict-match"]["all"]
    assert cell["errors"] == errors and cell["n"] == LIMIT - errors
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["models"][srv.url]["data"][0]["id"] == "faulty-model"
    assert manifest["backend_run"]["system_fingerprints"] == ["fp_faulty"]
    assert manifest["arm"] == {"label": "faulty", "state_dtype": None, "note": "on purpose"}
    assert f"{errors} questions ended with an error" in capsys.readouterr().err


def test_a_sigkilled_run_resumes_without_loss_or_duplicates(tmp_path):
    out = tmp_path / "run"
    with FaultyServer(slow_s=1.0, delay_s=0.25) as srv:
        cmd = [sys.executable, "-m", "evalkit", *_args(srv.url, out)]
        cmd[cmd.index("--concurrency") + 1] = "1"
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples_file = out / "samples.jsonl"
        deadline = time.monotonic() + 90
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if samples_file.exists() and len(samples_file.read_bytes().splitlines()) >= 5:
                    break
                time.sleep(0.05)
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(10)
        before = samples_file.read_bytes()
        n_before = len(_samples(out))
        assert 5 <= n_before < LIMIT
        assert cli(_args(srv.url, out)) == 0
    samples = _samples(out)
    assert sorted(s["doc_id"] for s in samples) == list(range(LIMIT))
    # the answered lines stay as they were; errored ones were set aside (errors.jsonl) and retried
    complete = [x for x in before.split(b"\n")[:-1] if json.loads(x)["error"] is None]
    assert (out / "samples.jsonl").read_bytes().startswith(b"".join(x + b"\n" for x in complete))
    _check_outcomes(srv, samples)
    manifest = json.loads((out / "manifest.json").read_text())
    resumed = manifest["resumes"][0]
    assert resumed["samples_on_disk"] == len(complete) and manifest["finished_at"]
    assert resumed["errors_retried"] == n_before - len(complete)


def test_a_run_in_which_every_request_failed_exits_non_zero_with_the_count(tmp_path, capsys):
    """Issue 43, item 4: a server that answers nothing is not a run that succeeded."""
    out = tmp_path / "run"
    with FaultyServer(plan=lambda fate, attempt: "500") as srv:
        args = _args(srv.url, out, "--max-retries", "0")
        args[args.index("--limit") + 1] = "3"
        assert cli(args) == 1
    err = capsys.readouterr().err
    assert "every request failed (3 of 3 questions" in err
    assert all(s["error"] for s in _samples(out))
