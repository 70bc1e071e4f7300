"""`pip install evalkit` without the `engine` extra: compare, run --server and the statistics work
with no torch, triton or transformers; the engine's commands say which extra to install.

The CLI runs in a subprocess that hides the engine's modules from the import system
(`helpers/light_evalkit.py`), against a local fake OpenAI server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.faulty_server import FaultyServer

from evalkit.store import prompt_hash

ROOT = Path(__file__).resolve().parents[1]
LIGHT = Path(__file__).parent / "helpers" / "light_evalkit.py"
REFERENCE_TOKENIZER = ROOT / "evalkit" / "assets" / "reference-model"
ENGINE_ONLY = {"torch", "triton", "transformers", "safetensors", "fastapi", "uvicorn"}


def _light(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(LIGHT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _requirement_names(reqs: list[str]) -> set[str]:
    import re

    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in reqs}


def test_the_base_install_has_no_engine_dependencies_and_the_extras_bring_them():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = _requirement_names(project["dependencies"])
    assert not base & ENGINE_ONLY, base & ENGINE_ONLY
    extras = project["optional-dependencies"]
    assert _requirement_names(extras["engine"]) >= {"torch", "triton", "transformers", "safetensors"}
    assert "evalkit-state[engine]" in extras["test"]  # the test suite installs everything it needs


def test_the_hiding_is_real(tmp_path):
    probe = (
        "import importlib.util, sys; sys.path.insert(0, sys.argv[1]); import light_evalkit as l; "
        "l.hide_engine_modules(); print(importlib.util.find_spec('torch')); import torch"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(LIGHT.parent)], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "None"
    assert "ModuleNotFoundError: No module named 'torch'" in out.stderr


def test_run_server_then_compare_without_the_engine(tmp_path):
    tasks = ["--tasks", "gsm8k,passkey", "--lengths", "1k", "--limit", "3", "--no-progress"]
    tok = ["--tokenizer", str(REFERENCE_TOKENIZER)]  # tokenizers alone sizes the passkey prompts
    with FaultyServer(lambda key, attempt: "ok") as server:
        for arm in ("base", "cand"):
            argv = ["run", "--server", server.url, "--arm", arm, *tasks, *tok, "--out", arm]
            out = _light(*argv, cwd=tmp_path)
            assert out.returncode == 0, out.stderr
            assert "6 new samples" in out.stdout
    samples = [json.loads(line) for line in (tmp_path / "base" / "samples.jsonl").read_text().splitlines()]
    assert {s["task"] for s in samples} == {"gsm8k", "passkey"} and not any(s["error"] for s in samples)
    assert all(s["correct"] for s in samples)  # scored (by lm-eval's filters for gsm8k)
    # the prompt is stored (as lm-eval's --log_samples does), and it is the one hashed
    assert all(prompt_hash(s["prompt"]) == s["prompt_hash"] for s in samples)
    assert any(s["prompt"].startswith("Question:") for s in samples if s["task"] == "gsm8k")

    out = _light("compare", "base", "cand", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "candidate `cand` vs baseline `base`" in out.stdout and "gsm8k" in out.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--arm", "fp16", "--limit", "1"],
        ["serve", "--arm", "fp16", "--port", "0"],
        ["verify-kernels", "--device", "cpu", "--launches", "1"],
    ],
)
def test_engine_commands_name_the_extra_in_one_line(tmp_path, argv):
    out = _light(*argv, cwd=tmp_path)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "pip install 'evalkit-state[engine]'" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_every_module_folder_is_a_package_so_a_regular_install_ships_it():
    """setup.py finds packages by their __init__.py; a folder without one is left out of a wheel
    (an editable install hides that: `evalkit.commands` was missing from `pip install .`)."""
    folders = {p.parent for top in ("evalkit", "kernels", "tasks") for p in (ROOT / top).rglob("*.py")}
    assert [f for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


def test_a_chat_template_rendered_here_names_the_extra(tmp_path):
    with FaultyServer(lambda key, attempt: "ok") as server:
        argv = ["run", "--server", server.url, "--arm", "x", "--tasks", "gsm8k", "--limit", "1"]
        out = _light(*argv, "--apply-chat-template", "--tokenizer", str(REFERENCE_TOKENIZER), cwd=tmp_path)
    assert out.returncode == 2 and "pip install 'evalkit-state[engine]'" in out.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_real_venv_from_the_package_index_without_torch(tmp_path):
    """The light install for real: `pip install .` into a fresh venv (about 1 GB from the index,
    minutes; deselected in CI by -m "not slow") gets no torch, and compare and run --server work."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv*", ".git", "results", "runs", "build"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(src)], capture_output=True, text=True, timeout=1800
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = f"import importlib.util as u; print([m for m in {ENGINE_ONLY!r} if u.find_spec(m)])"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
    evalkit = str(venv / "bin" / "evalkit")
    example = ROOT / "results" / "compare-example"
    compare = [evalkit, "compare", str(example / "fp32"), str(example / "fp16")]
    out = subprocess.run(compare, capture_output=True)
    assert out.returncode == 0 and b"candidate `fp16` vs baseline `fp32`" in out.stdout
    with FaultyServer(lambda key, attempt: "ok") as server:
        argv = [evalkit, "run", "--server", server.url, "--arm", "x", "--tasks", "gsm8k", "--limit", "2"]
        out = subprocess.run([*argv, "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert out.returncode == 0 and "2 new samples" in out.stdout, out.stderr
    out = subprocess.run([evalkit, "run", "--arm", "fp16"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "pip install 'evalkit-state[engine]'" in out.stderr
