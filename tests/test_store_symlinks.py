"""Links planted in a run directory are refused, never followed (issue 43, security item 2): a
`.lock` link truncated the file it pointed to, a `samples.jsonl` link made a resume append into
another run. Each case is one InputError and the linked-to file is untouched."""

from __future__ import annotations

import os

import pytest

from evalkit.errors import InputError
from evalkit.store.writer import RunWriter

MANIFEST = {"model": {"path": "m", "config_hash": "h"}, "backend": {"name": "local"}, "tasks": {}}
SAMPLE = {
    "task": "t",
    "doc_id": 0,
    "prompt_hash": "h",
    "target": "1",
    "response": "1",
    "correct": {"em": True},
    "error": None,
}


def test_a_planted_lock_link_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("do not truncate me\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    with pytest.raises(InputError, match=r"\.lock is a symbolic link"):
        RunWriter.open(run, MANIFEST)
    assert victim.read_text() == "do not truncate me\n"


def test_a_planted_samples_link_on_resume_is_refused_and_the_other_run_kept(tmp_path):
    with RunWriter.open(tmp_path / "other", MANIFEST) as w:
        w.append(SAMPLE)
    other_samples = (tmp_path / "other" / "samples.jsonl").read_bytes()
    run = tmp_path / "run"
    RunWriter.open(run, MANIFEST).close()
    (run / "samples.jsonl").unlink()
    (run / "samples.jsonl").symlink_to(tmp_path / "other" / "samples.jsonl")
    with pytest.raises(InputError, match=r"samples\.jsonl is a symbolic link"):
        RunWriter.open(run, MANIFEST)
    assert (tmp_path / "other" / "samples.jsonl").read_bytes() == other_samples


@pytest.mark.parametrize("name", ["manifest.json", "errors.jsonl", "summary.json"])
def test_other_linked_run_files_are_refused(tmp_path, name):
    victim = tmp_path / "victim"
    victim.write_text("{}\n")
    run = tmp_path / "run"
    RunWriter.open(run, MANIFEST).close()
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        RunWriter.open(run, MANIFEST)
    assert victim.read_text() == "{}\n"


def test_a_planted_temporary_name_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / f".manifest.json.tmp-{os.getpid()}").symlink_to(victim)
    RunWriter.open(run, MANIFEST).close()
    assert victim.read_text() == "keep\n"
    assert not (run / "manifest.json").is_symlink()
