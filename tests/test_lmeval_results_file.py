"""A finished run directory also holds lm-eval's aggregated results_<datetime>.json (issue 43): the
keys lm-eval 0.4.x's EvaluationTracker writes, values from the planted outcomes, and lm-eval's own
make_table reads it."""

import json
import math

import pytest

from evalkit.store import RunWriter, config_hash, prompt_hash

GSM8K_CFG = {"task": "gsm8k", "num_fewshot": 5, "filters": ["strict-match", "flexible-extract"]}
NIAH_CFG = {"lengths": [4096, 8192]}


def _manifest():
    return {
        "model": {"path": "org/tiny-kda"},
        "backend": {"name": "local"},
        "arm": {"label": "fp16", "state_dtype": "float16"},
        "tasks": {
            "gsm8k": {"config": GSM8K_CFG, "hash": config_hash(GSM8K_CFG)},
            "niah": {"config": NIAH_CFG, "hash": config_hash(NIAH_CFG)},
        },
    }


def _sample(task, doc, correct, length=None, score=None):
    s = {
        "task": task,
        "doc_id": doc,
        "prompt_hash": prompt_hash(f"{task}{doc}{length}"),
        "target": "x",
        "response": "x",
        "correct": correct,
        "error": None,
    }
    if length is not None:
        s["length"] = length
    if score is not None:
        s["score"] = score
    return s


def _write(path):
    w = RunWriter.open(path, _manifest(), durable=False)
    for doc in range(10):  # strict: 7 of 10 right, flexible: 9 of 10
        w.append(
            _sample(
                "gsm8k", doc, {"exact_match,strict-match": doc < 7, "exact_match,flexible-extract": doc < 9}
            )
        )
    for length, found in ((4096, [1.0, 1.0, 0.5, 1.0]), (8192, [0.5, 0.0, 0.5, 1.0])):
        for doc, frac in enumerate(found):
            w.append(_sample("niah", doc, {"string_match": frac == 1.0}, length, {"string_match": frac}))
    w.finish()


@pytest.fixture
def results(tmp_path):
    _write(tmp_path / "run")
    found = sorted((tmp_path / "run").glob("results_*.json"))
    assert len(found) == 1
    return json.loads(found[0].read_text())


def test_the_file_has_lm_eval_trackers_keys(results):
    for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config"):
        assert key in results
    assert results["config"]["model"] == "evalkit"
    assert results["config"]["model_args"] == "pretrained=org/tiny-kda,state_dtype=float16"
    assert results["n-shot"] == {"gsm8k": 5, "niah": 0}
    assert results["n-samples"]["gsm8k"] == {"original": 10, "effective": 10}
    assert results["configs"]["niah"]["lengths"] == [4096, 8192]


def test_metric_filter_names_and_values_follow_lm_eval(results):
    gsm = results["results"]["gsm8k"]
    assert gsm["exact_match,strict-match"] == pytest.approx(0.7)
    assert gsm["exact_match_stderr,strict-match"] == pytest.approx(math.sqrt(0.7 * 0.3 / 9))
    assert gsm["exact_match,flexible-extract"] == pytest.approx(0.9)
    niah = results["results"]["niah"]
    # item fractions, per length named by the length as lm-eval's RULER does
    assert niah["4096,none"] == pytest.approx(3.5 / 4)
    assert niah["8192,none"] == pytest.approx(2.0 / 4)
    assert niah["string_match,none"] == pytest.approx(5.5 / 8)
    assert "4096_stderr,none" in niah


def test_lm_evals_make_table_reads_it(results):
    from lm_eval.utils import make_table

    table = make_table(results)
    lines = [line for line in table.splitlines() if "strict-match" in line]
    assert lines and "0.7000" in lines[0] and "exact_match" in lines[0]
    assert any("8192" in line and "0.5000" in line for line in table.splitlines())


def test_a_resumed_finish_leaves_one_results_file(tmp_path):
    _write(tmp_path / "run")
    w = RunWriter.open(tmp_path / "run", _manifest(), durable=False)
    w.finish()
    assert len(list((tmp_path / "run").glob("results_*.json"))) == 1


def test_evalkit_run_writes_it_beside_its_files(tiny_hybrid_ckpt, tmp_path, capsys):
    """End to end: `evalkit run` on a tiny model leaves one results_*.json that agrees with its
    own summary.json and that lm-eval's make_table reads."""
    from lm_eval.utils import make_table

    from evalkit.cli import main as cli

    out = tmp_path / "run"
    argv = ["run", "--model", str(tiny_hybrid_ckpt), "--arm", "fp32", "--tasks", "gsm8k", "--limit", "2"]
    argv += ["--max-new-tokens", "2", "--device", "cpu", "--no-gold-logprob", "--no-progress"]
    assert cli([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    (found,) = out.glob("results_*.json")
    results = json.loads(found.read_text())
    summary = json.loads((out / "summary.json").read_text())
    for metric, cells in summary["gsm8k"].items():
        assert results["results"]["gsm8k"][metric] == cells["all"]["accuracy"]
    assert results["n-samples"]["gsm8k"]["effective"] == 2
    assert "exact_match" in make_table(results)


def test_an_undefined_stderr_is_lm_evals_na_and_make_table_still_reads_it(tmp_path):
    """One question: no stderr; lm-eval writes "N/A" there and make_table formats any number."""
    from lm_eval.utils import make_table

    w = RunWriter.open(tmp_path / "run", _manifest(), durable=False)
    w.append(_sample("gsm8k", 0, {"exact_match,strict-match": True}))
    w.finish()
    (found,) = (tmp_path / "run").glob("results_*.json")
    results = json.loads(found.read_text())
    assert results["results"]["gsm8k"]["exact_match_stderr,strict-match"] == "N/A"
    assert "N/A" in make_table(results)
