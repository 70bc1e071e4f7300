"""Resume refuses other data under the same doc ids (issue 16, item 8): the GSM8K files a task
read (paths and a content hash) are part of its identity in the manifest."""

from __future__ import annotations

import json
import shutil

import pytest

from evalkit.backends.base import GenResult
from evalkit.errors import MismatchError
from evalkit.runner import RunSpec, run_evaluation
from evalkit.testing.tiny_models import gsm8k_dir


class Answers42:
    name = "fixed"

    def describe(self):
        return {"name": self.name}

    def generate(self, requests, on_result):
        for i, _ in enumerate(requests):
            on_result(i, GenResult(text="The answer is 42.", n_generated=5, finish_reason="stop"))

    def close(self):
        pass


def _copy(dst, change_first_test_row=False):
    dst.mkdir()
    for split in ("train", "test"):
        shutil.copy(gsm8k_dir() / f"{split}.jsonl", dst / f"{split}.jsonl")
    if change_first_test_row:
        lines = (dst / "test.jsonl").read_text().splitlines()
        row = json.loads(lines[0])
        row["question"] = "A different question with the same doc id?"
        (dst / "test.jsonl").write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    return dst


def _run(tmp_path, data_dir):
    manifest = {"model": {"path": "fixed"}, "arm": {"label": "x"}, "backend": {"name": "fixed"}}
    spec = RunSpec(
        tasks=["gsm8k"],
        out_dir=tmp_path / "run",
        manifest=manifest,
        limit=1,
        data_dir=str(data_dir),
        task_options={"gsm8k": {"num_fewshot": 0}},
    )
    return run_evaluation(spec, Answers42(), None, progress=False)


def test_resume_with_other_data_is_refused_and_with_the_same_data_accepted(tmp_path):
    first = _run(tmp_path, _copy(tmp_path / "a"))
    assert first.stored == 1
    data = json.loads((tmp_path / "run" / "manifest.json").read_text())["tasks"]["gsm8k"]["data"]
    assert data["sources"][0]["files"]["test"].startswith(str(tmp_path / "a")) and len(data["sha256"]) == 64
    with pytest.raises(MismatchError, match=r"tasks\.gsm8k\.data\.sha256"):
        _run(tmp_path, _copy(tmp_path / "b", change_first_test_row=True))
    again = _run(tmp_path, _copy(tmp_path / "c"))  # the same rows elsewhere: the same data
    assert again.stored == 0 and again.skipped == 1
