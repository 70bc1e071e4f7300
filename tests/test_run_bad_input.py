"""Careless `evalkit run` input gets a one-line error and exit 2, never a traceback (issue 16, Low)."""

from __future__ import annotations

import pytest

from evalkit.cli import main as cli
from evalkit.errors import InputError
from evalkit.tasks.registry import get_task


def _run(capsys, *args):
    rc = cli(["run", "--arm", "fp32", "--no-progress", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


@pytest.mark.parametrize("tasks", ["", ",,,", " , "])
def test_tasks_naming_nothing_are_refused(capsys, tmp_path, tasks):
    rc, err = _run(capsys, "--tasks", tasks, "--out", str(tmp_path / "run"), "--model", str(tmp_path / "no"))
    assert rc == 2 and "names no task" in err
    assert not (tmp_path / "run").exists()


def test_an_absurd_length_is_refused_before_any_prompt_is_built(capsys, tmp_path):
    rc, err = _run(capsys, "--tasks", "passkey", "--lengths", "99999999k", "--model", str(tmp_path / "no"))
    assert rc == 2 and "longer than any model" in err


def test_a_length_beyond_the_models_max_is_refused_before_prompts(capsys, tmp_path, tiny_hybrid_ckpt):
    args = ["--model", str(tiny_hybrid_ckpt), "--device", "cpu", "--tasks", "passkey", "--lengths", "1m"]
    rc, err = _run(capsys, *args, "--limit", "1", "--out", str(tmp_path / "run"))
    assert rc == 2 and "does not fit the model's max length" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cpu:1"])
def test_an_unknown_device_is_refused(capsys, tmp_path, device):
    rc, err = _run(capsys, "--device", device, "--model", str(tmp_path / "no"))
    assert rc == 2 and "--device" in err


def test_cuda_without_a_gpu_is_refused(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    rc, err = _run(capsys, "--device", "cuda", "--model", str(tmp_path / "no"))
    assert rc == 2 and "no CUDA GPU" in err


@pytest.mark.parametrize("value", ["abc", -1, 1.5, True, [1]])
def test_bad_num_fewshot_values_are_refused(value):
    with pytest.raises(InputError, match="num_fewshot"):
        get_task("gsm8k", num_fewshot=value)


def test_a_non_numeric_task_option_is_an_input_error():
    with pytest.raises(InputError):
        get_task("gsm8k", max_new_tokens="many")
