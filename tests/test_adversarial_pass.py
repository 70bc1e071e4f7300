"""What issue 43's second adversarial pass found (`scripts/adversarial_pass.py`,
`results/adversarial-pass/`), each refused on one line (exit 2) instead of a hang, a traceback or a
leaked key: FIFOs and devices named as files, absurd engine sizes, a --server URL's query key,
abbreviated --api-key flags, unbounded retries, a missing --include-path."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from evalkit.cli import main as cli
from evalkit.errors import EvalkitError, InputError

UNBLOCK_S = 3.0  # a reader stuck on a FIFO gets EOF after this long (so a regression fails, not hangs)


@pytest.fixture
def fifo(tmp_path):
    """A FIFO nobody writes to; a helper opens and closes its write end after UNBLOCK_S, so code
    that (wrongly) opens it reads an empty file at last instead of blocking the suite."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    done = threading.Event()

    def unblock():
        deadline = time.monotonic() + UNBLOCK_S
        while not done.wait(0.2):
            if time.monotonic() < deadline:
                continue
            try:  # ENXIO until a reader has it open
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    threading.Thread(target=unblock, daemon=True).start()
    yield path
    done.set()


def _quick(fn):
    t0 = time.monotonic()
    try:
        fn()
    finally:
        assert time.monotonic() - t0 < UNBLOCK_S, "blocked on the FIFO"


def _one_line(capsys, rc: int, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(f"evalkit {command}: error: "), err
    return lines[0]


# -- FIFOs and devices where a file is expected ---------------------------------------------------
def test_a_fifo_config_file_is_one_line(fifo, capsys):
    with pytest.raises(SystemExit) as exc:
        _quick(lambda: cli(["run", "--config", str(fifo), "--arm", "fp32", "--help"]))
    assert exc.value.code == 2
    assert "not a regular file" in capsys.readouterr().err


def test_a_config_file_linked_to_a_device_is_refused(tmp_path, capsys):
    link = tmp_path / "run.yaml"
    link.symlink_to("/dev/null")  # /dev/zero would read without end; /dev/null shows the same check
    with pytest.raises(SystemExit) as exc:
        cli(["run", "--config", str(link), "--arm", "fp32", "--help"])
    assert exc.value.code == 2
    assert f"--config {link}: not a regular file" in capsys.readouterr().err


def test_a_fifo_plan_is_refused(fifo):
    from evalkit.compare.plan_file import load_plan

    with pytest.raises(InputError, match="not a regular file"):
        _quick(lambda: load_plan(fifo))


@pytest.mark.parametrize("command", ["ab", "compare", "run"])
def test_a_plan_nested_too_deeply_is_one_line(tmp_path, capsys, command):
    from helpers.runs import write_cells

    plan = tmp_path / "plan.yaml"
    plan.write_text("[" * 50_000 + "]" * 50_000 + "\n")
    base, cand = write_cells(tmp_path, {("gsm8k", None): (1, 2, 6)})
    argv = {
        "ab": ["ab", "--plan", str(plan), "--candidate", "fp16", "--out", str(tmp_path / "ab")],
        "compare": ["compare", str(base), str(cand), "--plan", str(plan)],
        "run": ["run", "--arm", "fp32", "--plan", str(plan), "--out", str(tmp_path / "run")],
    }[command]
    assert "plan.yaml: not a plan (nested too deeply)" in _one_line(capsys, cli(argv), command)


def test_a_run_whose_records_are_fifos_is_refused(tmp_path, fifo):
    from evalkit.store.jsonl import iter_jsonl, read_json

    with pytest.raises(InputError, match="not a regular file"):
        _quick(lambda: read_json(fifo))
    with pytest.raises(InputError, match="not a regular file"):
        _quick(lambda: list(iter_jsonl(fifo)))


def test_a_fifo_pilot_and_drift_input_are_refused(fifo, capsys):
    from evalkit.drift.inputs import from_file

    _quick(lambda: _one_line(capsys, cli(["plan", str(fifo)]), "plan"))
    with pytest.raises(InputError, match="--input .*: not a regular file"):
        _quick(lambda: from_file(str(fifo), lambda text: [1] * len(text), 4))


def test_a_json_integer_past_pythons_digit_limit_is_a_malformed_line(tmp_path, capsys):
    """json.loads raises a plain ValueError for an integer of more than 4,300 digits."""
    from helpers.runs import write_cells

    from evalkit.store.jsonl import read_json

    base, cand = write_cells(tmp_path, {("gsm8k", None): (1, 2, 6)})
    with open(cand / "samples.jsonl", "a") as fh:
        fh.write('{"id": ' + "9" * 5000 + "}\n")
    line = _one_line(capsys, cli(["compare", str(base), str(cand)]), "compare")
    assert "samples.jsonl:7: malformed JSON line: Exceeds the limit (4300 digits)" in line
    (tmp_path / "big.json").write_text('{"n": ' + "1" * 5000 + "}")
    with pytest.raises(InputError, match="malformed JSON"):
        read_json(tmp_path / "big.json")


def test_a_checkpoint_config_nested_too_deeply_is_one_line(tmp_path):
    from evalkit.model.checkpoint import read_config

    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="config.json is not valid JSON: nested too deeply"):
        read_config(tmp_path)


# -- absurd sizes ------------------------------------------------------------------------------------
def test_a_chunk_longer_than_the_context_is_refused():
    from evalkit.arm import parse_arm
    from evalkit.engine.config import EngineConfig

    huge = parse_arm("fp16@chunk=" + "9" * 30)  # overflowed torch's int64 in the prefill
    with pytest.raises(InputError, match="longer than the model's context"):
        EngineConfig(arm=huge, device="cpu").resolved(4096)
    EngineConfig(arm=parse_arm("fp16@chunk=4096"), device="cpu").resolved(4096)  # at the context: fine


def test_a_state_pool_larger_than_the_device_is_refused(tiny_pure_kda_ckpt):
    import torch

    from evalkit.engine.state import StatePools
    from evalkit.model.checkpoint import read_config

    _, arch = read_config(Path(tiny_pure_kda_ckpt))
    with pytest.raises(InputError, match="state slots need .* GiB, more than the cpu's"):
        StatePools(arch, 10**9, "fp32", torch.float32, "cpu", num_blocks=1, block_size=16)
    assert StatePools(arch, 4, "fp32", torch.float32, "cpu", num_blocks=1, block_size=16).num_slots == 4


def test_a_million_engine_processes_are_refused():
    from evalkit.backends.data_parallel import MAX_ENGINES, parse_devices

    with pytest.raises(InputError, match="at most 128 engine processes"):
        parse_devices("cpu", 10**6)
    assert parse_devices("cpu", MAX_ENGINES) == ["cpu"] * MAX_ENGINES


# -- remote runs --------------------------------------------------------------------------------------
def _no_retry(seconds: float) -> None:
    raise AssertionError("the backend retried instead of refusing its options")


@pytest.mark.parametrize(
    "option, message",
    [
        ({"max_retries": 10**9}, "--max-retries must be 0 to 100"),
        ({"timeout": float("nan")}, "--timeout must be a positive number of seconds"),
        ({"timeout": float("inf")}, "--timeout must be a positive number of seconds"),
    ],
)
def test_unbounded_retries_and_timeouts_are_refused(option, message):
    from evalkit.backends.openai_remote import OpenAIBackend

    with pytest.raises(EvalkitError, match=message):
        OpenAIBackend(["http://127.0.0.1:9"], sleep=_no_retry, **option)


def test_a_key_in_a_server_url_query_is_masked_and_refused(tmp_path, capsys):
    key = "sk-query-key-4410"
    argv = ["run", "--server", f"http://127.0.0.1:9/v1?api_key={key}&x=1", "--arm", "x", "--tasks", "gsm8k"]
    argv += ["--max-retries", "0", "--limit", "1"]
    line = _one_line(capsys, cli(argv + ["--out", str(tmp_path / "run")]), "run")
    assert key not in line and "api_key=***&x=1" in line and "has no query" in line
    assert not (tmp_path / "run").exists()


def test_query_secrets_are_masked_in_any_text():
    from evalkit.redact import mask_manifest, mask_text

    assert mask_text("GET http://h:1/v1?token=abc&n=2 failed") == "GET http://h:1/v1?token=***&n=2 failed"
    assert mask_text("https://h/x?key=K#frag") == "https://h/x?key=***#frag"
    assert mask_text("what?key=1 and a=b") == "what?key=1 and a=b"  # not a URL: left alone
    written = json.dumps(mask_manifest({"server": ["http://h/?access_token=T9"], "command": []}))
    assert "T9" not in written


@pytest.mark.parametrize("argv", [["--api", "K5"], ["--api-k=K5"], ["--api-ke", "K5"], ["--api-key", "K5"]])
def test_an_abbreviated_api_key_flag_is_masked_in_the_recorded_command(argv):
    from evalkit.redact import mask_manifest, redact_command

    assert "K5" not in " ".join(redact_command(["evalkit", "run", *argv, "--arm", "x"]))
    manifest = mask_manifest({"command": ["evalkit", "run", *argv], "resumes": [{"command": argv}]})
    assert "K5" not in json.dumps(manifest)


def test_argparse_takes_the_abbreviations_the_masking_covers():
    """The masking's premise: argparse reads `--api K` as --api-key (were abbreviations ever turned
    off, the test above would be moot, not wrong)."""
    import argparse

    from evalkit.commands import run

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    assert parser.parse_args(["--arm", "x", "--api", "K5"]).api_key == "K5"


def test_a_missing_include_path_is_one_line(tmp_path, capsys):
    argv = ["run", "--model", str(tmp_path / "no-model"), "--arm", "fp32", "--tasks", "gsm8k", "--limit", "1"]
    argv += ["--include-path", str(tmp_path / "nowhere")]
    line = _one_line(capsys, cli(argv + ["--out", str(tmp_path / "run")]), "run")
    assert "--include-path" in line and "not a folder" in line


@pytest.mark.parametrize("target", ["folder", "missing/x.json"])
def test_verify_kernels_json_into_a_folder_is_refused_before_the_launches(tmp_path, capsys, target):
    (tmp_path / "folder").mkdir()
    argv = ["verify-kernels", "--device", "cpu", "--launches", "1", "--json", str(tmp_path / target)]
    t0 = time.monotonic()
    assert "not a file in an existing folder" in _one_line(capsys, cli(argv), "verify-kernels")
    assert time.monotonic() - t0 < 5.0  # refused before any kernel ran


def test_one_sequence_slot_with_gold_logprobs_is_refused_not_spun_on(tmp_path, tiny_pure_kda_ckpt):
    """A question scored with its gold answer holds two state slots; --max-num-seqs 1 never
    admitted it and the engine looped for ever (a subprocess, so a regression times out)."""
    import subprocess
    import sys

    from evalkit.tasks.data import BUNDLED_DIR

    argv = [sys.executable, "-m", "evalkit", "run", "--model", str(tiny_pure_kda_ckpt), "--arm", "fp32"]
    argv += ["--tasks", "gsm8k", "--limit", "1", "--max-new-tokens", "2", "--max-num-seqs", "1"]
    argv += ["--data-dir", str(BUNDLED_DIR), "--device", "cpu", "--no-progress", "--out", str(tmp_path / "r")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and "leaves no slot for the gold answer" in lines[-1], p.stderr
    assert "Traceback" not in p.stderr


def test_a_chat_image_part_is_a_400_not_silently_dropped():
    from evalkit.serve.protocol import ChatRequest

    image = {"type": "image_url", "image_url": {"url": "http://x/cat.png"}}
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, image]}],
    }
    with pytest.raises(
        ValueError, match="content part of type 'image_url': this model takes text parts only"
    ):
        ChatRequest.model_validate(body)
    text_only = {"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    assert ChatRequest.model_validate(text_only).messages[0].text() == "Hi"
