"""The task registry, `parse_lengths`, and the `evalkit tasks` listing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evalkit.errors import InputError
from evalkit.tasks.registry import get_task, list_tasks, parse_lengths
from tests.helpers.task_names import RULER_TASKS

EXPECTED = [
    "gsm8k",
    "gsm8k_cot",
    "gsm8k_manyshot",
    "gsm8k_longdecode",
    *RULER_TASKS,
    "copy_list",
    "copy_list_long",
    "kv_recite",
    "kv_recite_long",
    "register",
    "register_short",
    "register_long",
]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4k,16k,64k", [4096, 16384, 65536]),
        ("128K", [131072]),
        ("1m", [1048576]),
        (" 4096 , 0.5k ", [4096, 512]),
        ("10,25,50", [10, 25, 50]),
    ],
)
def test_parse_lengths(text, expected):
    assert parse_lengths(text) == expected


@pytest.mark.parametrize("text", ["", "4q", "-4k", "0", "1.3k", "4k;8k"])
def test_parse_lengths_rejects(text):
    with pytest.raises(InputError):
        parse_lengths(text)


def test_every_task_is_listed_with_what_it_measures():
    infos = {i.name: i for i in list_tasks()}
    assert list(infos) == EXPECTED
    for info in infos.values():
        assert info.description and info.metrics and info.max_new_tokens
    assert infos["gsm8k"].default_lengths is None
    assert infos["passkey"].default_lengths == [4096, 8192, 16384, 32768, 65536, 131072]
    assert infos["gsm8k_longdecode"].default_lengths == [10, 25, 50]
    assert infos["niah_single_1"].max_new_tokens == 128 and infos["vt"].max_new_tokens == 30
    assert infos["cwe"].max_new_tokens == 120 and infos["fwe"].max_new_tokens == 50


def test_get_task_options_and_errors():
    assert get_task("passkey", num_docs=7).num_docs == 7
    assert get_task("gsm8k", num_fewshot=3).num_fewshot == 3
    with pytest.raises(InputError, match="unknown task"):
        get_task("gsm9k")
    with pytest.raises(InputError):
        get_task("passkey", haystack="x")
    # configs are JSON-able and differ when the questions differ
    a, b = get_task("passkey").config(), get_task("passkey", num_docs=3).config()
    assert json.dumps(a) != json.dumps(b)
    assert json.loads(json.dumps(get_task("gsm8k").config()))["lm_eval_yaml"]["num_fewshot"] == 5


def test_cli_lists_tasks():
    out = subprocess.run([sys.executable, "-m", "evalkit", "tasks"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for name in EXPECTED:
        assert name in out.stdout
    assert "4k,8k,16k,32k,64k,128k" in out.stdout and "K=10,25,50" in out.stdout
    js = subprocess.run([sys.executable, "-m", "evalkit", "tasks", "--json"], capture_output=True, text=True)
    assert [t["name"] for t in json.loads(js.stdout)] == EXPECTED
