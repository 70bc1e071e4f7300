"""`evalkit run --config FILE`: YAML keys are the long options; the command line wins."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from helpers.faulty_server import FaultyServer

from evalkit.cli import main
from evalkit.commands import run
from evalkit.config_file import parse_with_config

TASKS_DIR = Path(__file__).parent / "data" / "lm_eval_tasks"


def _parse(tmp_path: Path, text: str, *argv: str) -> argparse.Namespace:
    (tmp_path / "run.yaml").write_text(text)
    parser = argparse.ArgumentParser(prog="evalkit run")
    run.add_arguments(parser)
    return parse_with_config(parser, ["--config", str(tmp_path / "run.yaml"), *argv])


CONFIG = """
arm: fp16-server
server: [http://a:8000, http://b:8000]
tasks: [gsm8k, passkey]
lengths: 4k,16k
limit: 20
apply_chat_template: true
task-option: ["gsm8k:num_fewshot=0"]
"""


def test_the_file_fills_the_options_and_the_command_line_wins(tmp_path):
    args = _parse(tmp_path, CONFIG)
    assert (args.arm, args.tasks, args.lengths, args.limit) == ("fp16-server", "gsm8k,passkey", "4k,16k", 20)
    assert args.server == ["http://a:8000", "http://b:8000"] and args.apply_chat_template is True
    assert args.task_option == ["gsm8k:num_fewshot=0"] and args.concurrency == 16  # untouched default
    args = _parse(tmp_path, CONFIG, "--limit", "5", "--server", "http://c:8000", "--arm=other")
    assert (args.limit, args.server, args.arm) == (5, ["http://c:8000"], "other")
    assert args.tasks == "gsm8k,passkey"


@pytest.mark.parametrize(
    "text, message",
    [
        ("arm: x\nbogus: 1\n", "unknown option 'bogus'"),
        ("arm: x\nlimit: many\n", "limit: 'many' is not a valid value"),
        ("arm: x\nno-progress: 3\n", "expected true or false"),
        ("- arm\n", "must be a mapping"),
        ("arm: [unclosed\n", "is not valid YAML"),
        # issue 43, item 7: mappings where a value goes, and typed values of the wrong type
        ("arm: x\nlimit: {a: 1}\n", "limit: expected a value (text or a number), got a mapping"),
        ("arm: x\ntasks: {a: 1}\n", "tasks: expected a value"),
        ("arm: x\nlengths: {a: 1}\n", "lengths: expected a value"),
        ("arm: x\ntask-option: {a: 1}\n", "task-option: expected a list of values"),
        ("arm: x\nserver: [{a: 1}]\n", "server: expected a list of values"),
        ("arm: x\ntasks: [[gsm8k]]\n", "tasks: expected a value"),
        ("arm: x\ngold-logprob: 'no'\n", "gold-logprob: expected true or false, got 'no'"),
        ("arm: x\nlimit: true\n", "limit: expected a value (text or a number), got true"),
        ("arm: x\ndata-parallel: two\n", "data-parallel: 'two' is not a valid value"),
        ("arm: " + "[" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_a_bad_file_is_one_error_line_and_exit_2(tmp_path, capsys, text, message):
    with pytest.raises(SystemExit) as exit_info:
        _parse(tmp_path, text)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_bytes(b"arm: \xff\xfe\n")
    parser = argparse.ArgumentParser(prog="evalkit run")
    run.add_arguments(parser)
    with pytest.raises(SystemExit) as exit_info:
        parse_with_config(parser, ["--config", str(config)])
    assert exit_info.value.code == 2 and "is not UTF-8 text" in capsys.readouterr().err


def test_required_options_still_required_without_a_file(capsys):
    parser = argparse.ArgumentParser(prog="evalkit run")
    run.add_arguments(parser)
    with pytest.raises(SystemExit):
        parse_with_config(parser, ["--tasks", "gsm8k"])
    assert "--arm" in capsys.readouterr().err


def test_a_run_from_a_config_file_records_it(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"arm: cfg\ntasks: [tiny_arith]\ninclude-path: [{TASKS_DIR}]\nlimit: 2\nno-progress: true\n"
    )
    with FaultyServer(lambda key, attempt: "ok") as server:
        rc = main(["run", "--config", str(config), "--server", server.url, "--out", str(tmp_path / "r")])
    assert rc == 0
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["arm"]["label"] == "cfg" and manifest["limit"] == 2
    assert manifest["config_file"]["options"]["tasks"] == ["tiny_arith"]
    samples = [json.loads(line) for line in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all("prompt" in s for s in samples)


def test_no_prompts_leaves_the_text_out_and_keeps_the_hash(tmp_path):
    argv = ["run", "--tasks", "tiny_arith", "--include-path", str(TASKS_DIR), "--arm", "a", "--limit", "2"]
    with FaultyServer(lambda key, attempt: "ok") as server:
        out = ["--out", str(tmp_path / "r")]
        rc = main([*argv, "--no-prompts", "--no-progress", "--server", server.url, *out])
    assert rc == 0
    samples = [json.loads(line) for line in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all("prompt" not in s and s["prompt_hash"] for s in samples)
