"""The runner with a scripted task and a scripted backend: storage, errors, resume."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from evalkit.backends.base import GenResult
from evalkit.runner import RunSpec, run_evaluation
from evalkit.store import load_run
from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest


@dataclass
class ScriptedTask:
    """n one-question prompts plus one prompt asking three questions at once."""

    n: int = 6
    name: str = "scripted"
    description: str = "scripted"
    metrics: list = field(default_factory=lambda: ["exact"])
    default_lengths: list | None = None

    def config(self):
        return {"n": self.n}

    def requests(self, *, tokenizer, lengths, limit, seed, data_dir, apply_chat_template, show_progress=True):
        reqs = [TaskRequest(self.name, f"q{i}?", 8, ["\n"], [DocRef(i, str(i))]) for i in range(self.n)]
        multi = [DocRef(f"m{k}", f"m{k}") for k in range(3)]
        reqs.append(TaskRequest(self.name, "m?", 8, ["\n"], multi))
        return reqs[:limit] if limit else reqs

    def score(self, request, response):
        return [
            ScoredDoc(
                d.doc_id, d.target, {"exact": d.target in response.split()}, extracted={"exact": response}
            )
            for d in request.docs
        ]


class ScriptedBackend:
    """Answers q_i correctly for even i, wrongly for odd; `fail` prompts end with an error;
    `die_after` simulates a kill after that many results."""

    name = "scripted"

    def __init__(self, fail=(), die_after=None):
        self.fail, self.die_after, self.asked = set(fail), die_after, []

    def describe(self):
        return {"name": self.name}

    def generate(self, requests, on_result):
        for i, req in enumerate(requests):
            if self.die_after is not None and len(self.asked) >= self.die_after:
                raise KeyboardInterrupt
            self.asked.append(req.prompt)
            if req.prompt in self.fail:
                on_result(i, GenResult(text="", finish_reason="error", error="HTTP 500: boom"))
                continue
            q = req.prompt.rstrip("?")[1:]
            text = "m0 m2" if req.prompt == "m?" else (q if int(q) % 2 == 0 else "nope")
            on_result(i, GenResult(text=text, n_generated=3, finish_reason="stop"))

    def close(self):
        pass


def _spec(tmp_path, task, **kw):
    manifest = {"model": {"path": "scripted"}, "arm": {"label": "x"}, "backend": {"name": "scripted"}}
    return RunSpec(tasks=[task], out_dir=tmp_path / "run", manifest=manifest, **kw)


def _lines(tmp_path):
    return [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]


def test_every_question_is_stored_once_errors_unscored(tmp_path):
    task = ScriptedTask()
    out = run_evaluation(_spec(tmp_path, task), ScriptedBackend(fail={"q3?"}), None, progress=False)
    lines = _lines(tmp_path)
    assert len(lines) == 9 and len({(s["task"], str(s["doc_id"])) for s in lines}) == 9
    by_id = {str(s["doc_id"]): s for s in lines}
    assert by_id["3"]["error"] == "HTTP 500: boom" and by_id["3"]["correct"] == {}
    assert by_id["2"]["correct"] == {"exact": True} and by_id["1"]["correct"] == {"exact": False}
    assert [by_id[f"m{k}"]["correct"]["exact"] for k in range(3)] == [True, False, True]
    cell = out.summary["scripted"]["exact"]["all"]
    assert cell["n"] == 8 and cell["errors"] == 1 and cell["accuracy"] == pytest.approx(5 / 8)
    assert out.errors == 1 and out.stored == 9
    assert load_run(tmp_path / "run").manifest["tasks"]["scripted"]["hash"]


def test_resume_after_a_kill_asks_only_what_is_missing(tmp_path):
    task = ScriptedTask()
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(_spec(tmp_path, task), ScriptedBackend(die_after=4), None, progress=False)
    assert len(_lines(tmp_path)) == 4
    again = ScriptedBackend()
    out = run_evaluation(_spec(tmp_path, task), again, None, progress=False)
    assert again.asked == ["q4?", "q5?", "m?"] and out.skipped == 4
    lines = _lines(tmp_path)
    assert len(lines) == 9 and len({str(s["doc_id"]) for s in lines}) == 9
    third = ScriptedBackend()
    run_evaluation(_spec(tmp_path, task), third, None, progress=False)
    assert third.asked == [] and len(_lines(tmp_path)) == 9


def test_a_multi_question_prompt_writes_only_its_missing_docs(tmp_path):
    task = ScriptedTask()
    run_evaluation(_spec(tmp_path, task), ScriptedBackend(), None, progress=False)
    path = tmp_path / "run" / "samples.jsonl"
    kept = [x for x in path.read_text().splitlines() if json.loads(x)["doc_id"] != "m1"]
    path.write_text("\n".join(kept) + "\n")
    again = ScriptedBackend()
    run_evaluation(_spec(tmp_path, task), again, None, progress=False)
    assert again.asked == ["m?"]
    assert sorted(str(s["doc_id"]) for s in _lines(tmp_path)).count("m1") == 1


def test_a_changed_task_config_is_refused_on_resume(tmp_path):
    from evalkit.errors import MismatchError

    run_evaluation(_spec(tmp_path, ScriptedTask()), ScriptedBackend(), None, progress=False)
    with pytest.raises(MismatchError, match="tasks.scripted.hash"):
        run_evaluation(_spec(tmp_path, ScriptedTask(n=5)), ScriptedBackend(), None, progress=False)


def test_summary_table_lists_task_metric_length(tmp_path):
    from evalkit.runner.table import render_summary

    out = run_evaluation(_spec(tmp_path, ScriptedTask()), ScriptedBackend(fail={"q1?"}), None, progress=False)
    text = render_summary(out.summary)
    assert "scripted" in text and "exact" in text
    assert "0.6250" in text and "0.1830" in text  # 5 of 8 right (lm-eval stderr), 1 error
    assert "items right" not in text  # exact-match tasks: the score is the accuracy


def test_summary_table_shows_the_items_right_of_item_scored_tasks():
    from evalkit.runner.table import render_summary

    cell = {"n": 40, "accuracy": 0.0, "stderr": 0.0, "errors": 0, "mean_score": 0.4234375}
    text = render_summary({"kv_recite_long": {"item_match_all": {"2048": cell, "all": cell}}})
    header = next(line for line in text.splitlines() if "task" in line)
    assert "items right" in header and text.count("0.4234") == 2


def test_task_options_reach_the_task_and_its_config_hash(tmp_path):
    from evalkit.commands.run import parse_task_options
    from evalkit.errors import InputError

    opts = parse_task_options(
        ["gsm8k:num_fewshot=0", "max_new_tokens=32", "passkey:note=a:b=c"], ["gsm8k", "passkey"]
    )
    assert opts == {
        "gsm8k": {"num_fewshot": 0, "max_new_tokens": 32},
        "passkey": {"max_new_tokens": 32, "note": "a:b=c"},
    }
    for bad in (["nope:a=1"], ["novalue"]):
        with pytest.raises(InputError):
            parse_task_options(bad, ["gsm8k"])


def test_no_model_and_no_server_without_the_reference_model_is_a_clear_error(monkeypatch, capsys, tmp_path):
    from evalkit.cli import main as cli

    # the reference model's files are not where evalkit looks (an empty copy location)
    monkeypatch.setenv("EVALKIT_REFERENCE_MODEL", str(tmp_path / "no-model-here"))
    assert cli(["run", "--arm", "fp16", "--tasks", "passkey", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalkit run: error: the reference model is not in") and "--model PATH" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_a_local_run_refuses_a_free_arm_label(capsys):
    from evalkit.cli import main as cli

    assert cli(["run", "--model", "x", "--arm", "vllm-fp16"]) == 2
    err = capsys.readouterr().err
    assert "unknown state format 'vllm-fp16'" in err and "free labels are for --server runs" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("progress, tty", [(False, True), (True, True), (True, False)])
def test_no_progress_also_silences_the_document_building_bars(tmp_path, monkeypatch, progress, tty):
    """Long-context tasks show a bar while they build documents, only on a terminal and without
    --no-progress (it filled run logs written to files): the runner says so through `show_progress`."""
    import sys

    from evalkit.tasks.long_context import base

    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)

    seen = []

    class BuildingTask(ScriptedTask):
        def requests(self, **kw):
            seen.append(kw["show_progress"])
            bar = base.progress(1, "building", kw["show_progress"])
            seen.append(bar.disable)
            bar.close()
            return super().requests(**kw)

    run_evaluation(_spec(tmp_path, BuildingTask()), ScriptedBackend(), None, progress=progress)
    shown = progress and tty
    assert seen == [shown, not shown]


def test_resume_retries_errored_samples_and_keeps_their_history(tmp_path):
    """Issue 16, item 4: errors from a sick server are asked again on the next run."""
    task = ScriptedTask(n=3)
    first = run_evaluation(_spec(tmp_path, task), ScriptedBackend(fail={"q1?"}), None, progress=False)
    assert first.errors == 1
    again = ScriptedBackend()
    out = run_evaluation(_spec(tmp_path, task), again, None, progress=False)
    assert again.asked == ["q1?"] and out.errors == 0
    by_id = {str(s["doc_id"]): s for s in _lines(tmp_path)}
    assert len(by_id) == 6 and by_id["1"]["error"] is None and by_id["1"]["correct"] == {"exact": False}
    history = (tmp_path / "run" / "errors.jsonl").read_text().splitlines()
    assert [json.loads(x)["error"] for x in history] == ["HTTP 500: boom"]
    assert load_run(tmp_path / "run").manifest["resumes"][-1]["errors_retried"] == 1
    assert out.summary["scripted"]["exact"]["all"]["errors"] == 0


def test_a_task_whose_every_sample_errored_keeps_its_error_count(tmp_path):
    task = ScriptedTask(n=2)
    everything = {"q0?", "q1?", "m?"}
    out = run_evaluation(_spec(tmp_path, task), ScriptedBackend(fail=everything), None, progress=False)
    cell = out.summary["scripted"]["exact"]["all"]
    assert cell["n"] == 0 and cell["errors"] == 5 and cell["accuracy"] is None
