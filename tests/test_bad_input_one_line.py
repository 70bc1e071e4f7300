"""The tracebacks of issue 43 (item 7) are one line and exit 2: deeply nested JSON lines in a run
read by compare or resumed, a malformed GSM8K --data-dir, an absurd few-shot count, a malformed
--server URL. (The --config file's cases are in test_run_config_file, serve's in test_serve_*.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.runs import manifest, write_cells

from evalkit.cli import main as cli
from evalkit.errors import InputError
from evalkit.store import RunWriter

DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON, deeper than Python's parser recursion


def _one_line(capsys, rc: int, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(f"evalkit {command}: error: "), err
    return lines[0]


def test_a_deeply_nested_line_is_one_line_in_compare(tmp_path, capsys):
    base, cand = write_cells(tmp_path, {("gsm8k", None): (1, 2, 6)})
    with open(cand / "samples.jsonl", "a") as fh:
        fh.write(DEEP + "\n")
    line = _one_line(capsys, cli(["compare", str(base), str(cand)]), "compare")
    assert "samples.jsonl:7: malformed JSON line: nested too deeply" in line


def test_a_deeply_nested_line_is_refused_on_resume(tmp_path):
    run = tmp_path / "run"
    RunWriter.open(run, manifest("fp16", ["gsm8k"])).close()
    (run / "samples.jsonl").write_text(DEEP + "\n")
    with pytest.raises(InputError, match="nested too deeply"):
        RunWriter.open(run, manifest("fp16", ["gsm8k"]))


def test_a_deeply_nested_task_option_is_one_line(capsys):
    rc = cli(["run", "--arm", "fp32", "--tasks", "gsm8k", "--task-option", f"gsm8k:x={DEEP}"])
    assert "nested too deeply" in _one_line(capsys, rc, "run")


BAD_GSM8K_FILES = {
    "non-UTF-8": (b"\xff\xfe not text\n", "not UTF-8 text"),
    "empty": (b"", "no rows"),
    "bad JSON": (b'{"question": "1+1?", "answer": "#### 2"\n', ":1: not a JSON line"),
    "missing field": (b'{"question": "1+1?"}\n', ":1: no text 'answer'"),
    "not an object": (b"[1, 2]\n", ":1: no text 'question' or 'answer'"),
    "nested too deeply": (DEEP.encode() + b"\n", ":1: not a JSON line"),
}


@pytest.mark.parametrize("case", list(BAD_GSM8K_FILES))
def test_a_malformed_gsm8k_data_dir_is_one_line(tmp_path, case):
    from evalkit.tasks.data import BUNDLED_DIR, locate_gsm8k

    data, message = BAD_GSM8K_FILES[case]
    (tmp_path / "train.jsonl").write_bytes((BUNDLED_DIR / "train.jsonl").read_bytes())
    (tmp_path / "test.jsonl").write_bytes(data)
    with pytest.raises(InputError, match=message):
        locate_gsm8k(tmp_path)


def test_more_few_shot_examples_than_the_pool_is_one_line():
    from evalkit.tasks.data import BUNDLED_DIR
    from evalkit.tasks.gsm8k import GSM8KTask

    with pytest.raises(InputError, match="num_fewshot 100000 is more than the 7473 few-shot examples"):
        GSM8KTask(num_fewshot=100000).requests(data_dir=str(BUNDLED_DIR), limit=1, show_progress=False)


@pytest.mark.parametrize(
    "url, message",
    [
        ("http://[::1", "is not a URL"),
        ("http://:80", "not an http(s) URL with a host"),
        ("ftp://host", "not an http(s) URL with a host"),
    ],
)
def test_a_malformed_server_url_is_one_line(capsys, tmp_path, url, message):
    rc = cli(["run", "--arm", "x", "--server", url, "--out", str(tmp_path / "r"), "--no-progress"])
    assert message in _one_line(capsys, rc, "run")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--shutdown-timeout", "nan"),
        ("--shutdown-timeout", "inf"),
        ("--shutdown-timeout", "-1"),
        ("--max-body-mb", "inf"),
        ("--max-body-mb", "nan"),
        ("--max-body-mb", "1e-12"),
    ],
)
def test_serve_numbers_that_are_not_finite_are_one_line_before_the_model_loads(capsys, tmp_path, flag, value):
    rc = cli(["serve", "--arm", "fp32", "--port", "0", "--model", str(tmp_path / "no-model"), flag, value])
    assert flag in _one_line(capsys, rc, "serve")  # about the flag, not the missing model


def _remote_code_checkpoint(src: Path, dst: Path) -> Path:
    """A copy of `src` whose tokenizer asks to run code it ships (an auto_map)."""
    import json
    import shutil

    shutil.copytree(src, dst)
    cfg = json.loads((dst / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg))
    return dst


def test_evalkit_lm_eval_refusing_remote_code_is_one_line(tiny_hybrid_ckpt, tmp_path, monkeypatch, capsys):
    """lm-eval's CLI, its model construction stood in by the evalkit model's own (the refusal)."""
    import lm_eval.__main__

    from evalkit.interop import lm_eval_cli
    from evalkit.interop.lm_eval_model import EvalkitLM

    ckpt = _remote_code_checkpoint(tiny_hybrid_ckpt, tmp_path / "ckpt")
    monkeypatch.setattr(
        lm_eval.__main__, "cli_evaluate", lambda: EvalkitLM(pretrained=str(ckpt), device="cpu")
    )
    with pytest.raises(SystemExit) as exit_info:
        lm_eval_cli.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("evalkit-lm-eval: error: ") and "--trust_remote_code" in err[0]


@pytest.mark.slow
def test_evalkit_lm_eval_refusing_remote_code_is_one_line_end_to_end(tiny_hybrid_ckpt, tmp_path):
    import os
    import subprocess
    import sys

    ckpt = _remote_code_checkpoint(tiny_hybrid_ckpt, tmp_path / "ckpt")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "evalkit.interop.lm_eval_cli", "run", "--model", "evalkit"]
    cmd += ["--model_args", f"pretrained={ckpt}", "--device", "cpu", "--tasks", "gsm8k", "--limit", "1"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("evalkit-lm-eval: error: ") and "--trust_remote_code" in last


def test_a_mistyped_task_in_compares_margin_gets_a_did_you_mean(tmp_path, capsys):
    base, cand = write_cells(tmp_path, {("gsm8k", None): (1, 2, 6), ("passkey", 4096): (0, 1, 6)})
    rc = cli(["compare", str(base), str(cand), "--margin", "gsm8kk=0.02,nope=0.01"])
    line = _one_line(capsys, rc, "compare")
    assert "did you mean 'gsm8k' for 'gsm8kk'?" in line and "for 'nope'" not in line


@pytest.mark.parametrize("task", ["passkey", "kv_retrieval"])
def test_a_task_without_the_tokenizer_it_needs_names_the_option(task):
    from evalkit.tasks.registry import get_task

    with pytest.raises(InputError, match="pass --tokenizer"):
        get_task(task).requests(tokenizer=None, lengths=[4096], limit=1, show_progress=False)


def test_evalkit_lm_eval_names_the_embedded_model_for_tasks_that_read_pretrained():
    """lm-eval passes model_args to tasks (RULER reads `pretrained` to load the tokenizer): with no
    `pretrained` the evalkit model runs the embedded model, so that is the one named."""
    from evalkit.interop.lm_eval_cli import with_pretrained

    ref = lambda: "/ref"  # noqa: E731
    base = ["run", "--model", "evalkit", "--tasks", "niah_single_1"]
    assert with_pretrained(base, ref) == [*base, "--model_args", "pretrained=/ref"]
    given = [*base, "--model_args", "state_dtype=fp16"]
    assert with_pretrained(given, ref) == [*base, "--model_args", "state_dtype=fp16,pretrained=/ref"]
    assert with_pretrained([*base, "--model_args=state_dtype=fp16"], ref)[-1] == (
        "--model_args=state_dtype=fp16,pretrained=/ref"
    )
    explicit = [*base, "--model_args", "pretrained=/mine,state_dtype=fp16"]
    assert with_pretrained(explicit, ref) == explicit
    other = ["run", "--model", "hf", "--model_args", "pretrained=gpt2"]
    assert with_pretrained(other, ref) == other
