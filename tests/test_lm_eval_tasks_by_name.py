"""`evalkit run --tasks NAME` for any lm-eval generate_until task: from --include-path or from
lm-eval's own registry, asked as lm-eval asks it and scored by lm-eval's filters and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.faulty_server import FaultyServer

from evalkit.cli import main
from evalkit.errors import InputError
from evalkit.tasks.data import BUNDLED_DIR
from evalkit.tasks.gsm8k import GSM8KTask
from evalkit.tasks.lm_eval_task import LmEvalTask
from evalkit.tasks.registry import get_task

TASKS_DIR = Path(__file__).parent / "data" / "lm_eval_tasks"


def _samples(run: Path) -> dict[int, dict]:
    return {s["doc_id"]: s for s in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_a_yaml_task_from_include_path_runs_and_is_scored_by_its_own_filters(tmp_path, capsys):
    argv = ["run", "--tasks", "tiny_arith", "--include-path", str(TASKS_DIR), "--arm", "a", "--no-progress"]
    with FaultyServer(lambda key, attempt: "ok") as server:
        assert main([*argv, "--server", server.url, "--out", str(tmp_path / "run")]) == 0
        first = _samples(tmp_path / "run")
        # the same command resumes: the task's config (functions included) hashes the same again
        assert main([*argv, "--server", server.url, "--out", str(tmp_path / "run")]) == 0
    assert "0 new samples (6 already on disk)" in capsys.readouterr().out
    assert sorted(first) == list(range(6))
    right = {d for d, s in first.items() if s["correct"]["exact_match,get-answer"]}
    assert right == {0, 2, 4}  # see tests/data/lm_eval_tasks/tiny_arith.py
    assert first[1]["prompt"] == "Question: What is 1 plus 2?\nAnswer:"
    assert first[1]["extracted"]["get-answer"] != "3"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    cfg = manifest["tasks"]["tiny_arith"]["config"]
    assert cfg["family"] == "lm_eval" and cfg["lm_eval_yaml"]["custom_dataset"]["function"] == "docs"


def test_lm_evals_gsm8k_by_name_equals_evalkits_gsm8k_on_the_bundled_data():
    generic, builtin = LmEvalTask("gsm8k"), GSM8KTask("gsm8k")
    assert generic.yaml_path.parent.name == "gsm8k" and generic.metrics == builtin.metrics
    a = generic.requests(limit=4, data_dir=str(BUNDLED_DIR))
    b = builtin.requests(limit=4, data_dir=str(BUNDLED_DIR))
    assert [r.prompt for r in a] == [r.prompt for r in b] and a[0].prompt.count("Question:") == 6
    assert [r.until for r in a] == [r.until for r in b] and a[0].meta["data"]["kind"] == "local"
    for response in (" 3 + 4 = 7.\n#### 7", "The answer is 72", "no idea"):
        for ra, rb in zip(a, b):
            sa, sb = generic.score(ra, response)[0], builtin.score(rb, response)[0]
            assert (sa.correct, sa.extracted) == (sb.correct, sb.extracted)
    right = " 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18"  # test doc 0 (Janet's ducks)
    assert generic.score(a[0], right)[0].correct == {
        "exact_match,strict-match": True,
        "exact_match,flexible-extract": True,
    }
    assert "dataset_path" not in generic.config()["lm_eval_yaml"]  # where GSM8K lives is no identity


def test_names_evalkit_lacks_go_to_lm_eval_and_bad_ones_say_why():
    assert isinstance(get_task("tiny_arith", include_path=[str(TASKS_DIR)]), LmEvalTask)
    with pytest.raises(InputError, match="neither an evalkit task .* nor an lm-eval task"):
        get_task("gsm9k")
    with pytest.raises(InputError, match="generate_until tasks only"):
        get_task("hellaswag")  # multiple_choice: log-likelihoods, not generations
    with pytest.raises(InputError, match="not a folder"):
        get_task("tiny_arith", include_path=[str(TASKS_DIR / "missing")])
