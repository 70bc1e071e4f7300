"""One writer per run directory (issue 16, item 3): a second writer is refused with a one-line
error naming the holder's pid, and the lock goes when its holder closes, exits or is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from evalkit.errors import InputError
from evalkit.store.writer import RunWriter

MANIFEST = {"model": {"path": "m", "config_hash": "h"}, "backend": {"name": "local"}, "tasks": {}}

HOLDER = f"""
import sys, time
from evalkit.store.writer import RunWriter
w = RunWriter.open(sys.argv[1], {MANIFEST!r})
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_writer_in_the_same_process_is_refused_until_the_first_closes(tmp_path):
    first = RunWriter.open(tmp_path / "run", MANIFEST)
    with pytest.raises(InputError, match=rf"pid {os.getpid()}\b"):
        RunWriter.open(tmp_path / "run", MANIFEST)
    first.close()
    RunWriter.open(tmp_path / "run", MANIFEST).close()


def test_the_lock_of_a_killed_writer_is_released(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match=rf"another evalkit process \(pid {holder.pid}\)"):
            RunWriter.open(run, MANIFEST)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    RunWriter.open(run, MANIFEST).close()  # resumable at once


def test_an_unwritable_out_is_a_one_line_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="cannot write the run directory"):
        RunWriter.open(tmp_path / "file" / "run", MANIFEST)  # as a read-only parent: mkdir fails
    if os.geteuid() != 0:  # root writes anywhere
        tmp_path.chmod(0o500)
        try:
            with pytest.raises(InputError, match="cannot write the run directory"):
                RunWriter.open(tmp_path / "run", MANIFEST)
        finally:
            tmp_path.chmod(0o700)


def test_a_full_disk_is_a_one_line_error_and_a_rerun_repairs(tmp_path, monkeypatch, capsys):
    import errno

    from evalkit.store import writer as writer_module

    w = RunWriter.open(tmp_path / "run", MANIFEST)
    sample = {"task": "t", "doc_id": 0, "length": None, "prompt_hash": "h", "target": "1", "response": "1"}
    w.append({**sample, "correct": {"m": True}, "error": None})
    real_write = os.write

    def full(fd, data):
        real_write(fd, bytes(data[:5]))  # a torn line, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer_module.os, "write", full)
    with pytest.raises(InputError, match="No space left on device.*re-run"):
        w.append({**sample, "doc_id": 1, "correct": {"m": True}, "error": None})
    w.close()
    monkeypatch.setattr(writer_module.os, "write", real_write)
    again = RunWriter.open(tmp_path / "run", MANIFEST)
    assert "dropped a truncated last line" in capsys.readouterr().err
    assert again.done_keys == {("t", "0", None)}
    again.close()


@pytest.mark.parametrize(
    "field,value",
    [("resumes", "yes"), ("tasks", ["gsm8k"]), ("model", "m"), ("lengths", [4096, "8k"]), ("arm", 3)],
)
def test_a_manifest_field_of_the_wrong_type_is_a_one_line_error_on_resume(tmp_path, field, value):
    import json

    RunWriter.open(tmp_path / "run", MANIFEST).close()
    path = tmp_path / "run" / "manifest.json"
    on_disk = json.loads(path.read_text())
    path.write_text(json.dumps({**on_disk, field: value}))
    with pytest.raises(InputError, match=f"field '{field}'"):
        RunWriter.open(tmp_path / "run", MANIFEST)


@pytest.mark.parametrize("length", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_length_in_samples_is_a_one_line_error_on_resume(tmp_path, length):
    RunWriter.open(tmp_path / "run", MANIFEST).close()
    line = (
        f'{{"task": "t", "doc_id": 1, "length": {length}, "prompt_hash": "h", "target": "1", '
        '"response": "1", "correct": {"m": true}, "error": null}\n'
    )
    (tmp_path / "run" / "samples.jsonl").write_text(line)
    with pytest.raises(InputError, match="field 'length' must be a positive integer"):
        RunWriter.open(tmp_path / "run", MANIFEST)


@pytest.mark.parametrize("doc_id", ["--1", "²", "0x1"])
def test_odd_string_doc_ids_resume(tmp_path, doc_id):
    w = RunWriter.open(tmp_path / "run", MANIFEST)
    w.append({"task": "t", "doc_id": doc_id, "length": None, "prompt_hash": "h", "target": "1",
              "response": "1", "correct": {"m": True}, "error": None})  # fmt: skip
    w.close()
    again = RunWriter.open(tmp_path / "run", MANIFEST)
    assert again.done_keys == {("t", doc_id, None)}
    assert again.finish()["t"]["m"]["all"]["n"] == 1
