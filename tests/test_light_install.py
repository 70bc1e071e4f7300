"""`pip install evalkit` without the `engine` and `lmeval` extras: compare, run --server on
evalkit's own tasks and the statistics work with no torch, triton, transformers or lm-eval; the
engine's commands and lm-eval's tasks say which extra to install.

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
LMEVAL_ONLY = {"lm-eval", "datasets"}


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
    assert not base & (ENGINE_ONLY | LMEVAL_ONLY), base & (ENGINE_ONLY | LMEVAL_ONLY)
    extras = project["optional-dependencies"]
    assert _requirement_names(extras["engine"]) >= {"torch", "triton", "transformers", "safetensors"}
    assert _requirement_names(extras["lmeval"]) == LMEVAL_ONLY
    assert "evalkit-state[lmeval]" in extras["engine"]  # the lm-eval model needs lm-eval
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
    """gsm8k's runs are made with lm-eval installed (it scores them); the light install runs
    passkey itself and compares both."""
    lengths = ["--lengths", "1k", "--limit", "3", "--no-progress"]
    tok = ["--tokenizer", str(REFERENCE_TOKENIZER)]  # tokenizers alone sizes the passkey prompts
    full = [sys.executable, "-m", "evalkit"]
    with FaultyServer(lambda key, attempt: "ok") as server:
        for arm in ("base", "cand"):
            common = ["run", "--server", server.url, "--arm", arm, *lengths, *tok]
            argv = [*full, *common, "--tasks", "gsm8k", "--out", f"gsm8k-{arm}"]
            out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
            assert out.returncode == 0, out.stderr
            out = _light(*common, "--tasks", "passkey", "--out", f"passkey-{arm}", cwd=tmp_path)
            assert out.returncode == 0, out.stderr
            assert "3 new samples" in out.stdout
    for task in ("gsm8k", "passkey"):
        lines = (tmp_path / f"{task}-base" / "samples.jsonl").read_text().splitlines()
        samples = [json.loads(line) for line in lines]
        assert len(samples) == 3 and not any(s["error"] for s in samples)
        # the prompt is stored (as lm-eval's --log_samples does), and it is the one hashed
        assert all(prompt_hash(s["prompt"]) == s["prompt_hash"] for s in samples)
        out = _light("compare", f"{task}-base", f"{task}-cand", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "candidate `cand` vs baseline `base`" in out.stdout and task in out.stdout
    gsm8k = [
        json.loads(line) for line in (tmp_path / "gsm8k-base" / "samples.jsonl").read_text().splitlines()
    ]
    assert all(s["correct"] for s in gsm8k)  # scored by lm-eval's filters
    assert all(s["prompt"].startswith("Question:") for s in gsm8k)


def test_an_lm_eval_task_names_the_lmeval_extra_in_one_line(tmp_path):
    with FaultyServer(lambda key, attempt: "ok") as server:
        argv = ["run", "--server", server.url, "--arm", "x", "--tasks", "gsm8k", "--limit", "1"]
        out = _light(*argv, "--out", "r", cwd=tmp_path)
        assert not server.log  # refused before any question is asked
    lines = [line for line in out.stderr.splitlines() if "error" in line]
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(lines) == 1 and "pip install 'evalkit-state[lmeval]'" in lines[0], out.stderr


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
        argv = ["run", "--server", server.url, "--arm", "x", "--tasks", "passkey", "--lengths", "1k"]
        out = _light(
            *argv,
            "--limit",
            "1",
            "--apply-chat-template",
            "--tokenizer",
            str(REFERENCE_TOKENIZER),
            cwd=tmp_path,
        )
    assert out.returncode == 2 and "pip install 'evalkit-state[engine]'" in out.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_real_venv_from_the_package_index_without_torch(tmp_path):
    """The light install for real: `pip install .` into a fresh venv (from the index, minutes;
    deselected in CI by -m "not slow") gets no torch and no lm-eval, and compare and run --server
    work (results/install-size/ measures its size)."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv*", ".git", "results", "runs", "build"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(src)], capture_output=True, text=True, timeout=1800
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    hidden = sorted(ENGINE_ONLY | {"lm_eval", "datasets"})
    probe = f"import importlib.util as u; print([m for m in {hidden!r} if u.find_spec(m)])"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
    evalkit = str(venv / "bin" / "evalkit")
    example = ROOT / "results" / "compare-example"
    compare = [evalkit, "compare", str(example / "fp32"), str(example / "fp16")]
    out = subprocess.run(compare, capture_output=True)
    assert out.returncode == 0 and b"candidate `fp16` vs baseline `fp32`" in out.stdout
    with FaultyServer(lambda key, attempt: "ok") as server:
        argv = [evalkit, "run", "--server", server.url, "--arm", "x", "--tasks", "passkey", "--limit", "2"]
        argv += ["--lengths", "1k", "--tokenizer", str(REFERENCE_TOKENIZER)]
        out = subprocess.run([*argv, "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert out.returncode == 0 and "2 new samples" in out.stdout, out.stderr
    out = subprocess.run([evalkit, "run", "--arm", "fp16"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "pip install 'evalkit-state[engine]'" in out.stderr


def test_cache_probe_without_the_engine_or_lm_eval(tmp_path):
    from helpers.cached_server import CachedServer

    with CachedServer(cache_dtype_bug=True) as server:
        argv = ["cache-probe", "--server", server.url, "--limit", "6", "--shots", "1", "--out", "probe"]
        out = _light(*argv, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "answers depend on the prefix cache" in out.stdout


def test_evalkit_lm_eval_names_the_lmeval_extra_in_one_line(tmp_path):
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import light_evalkit as l; l.hide_engine_modules(); "
        "sys.argv = ['evalkit-lm-eval', '--help']; from evalkit.interop.lm_eval_cli import main; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(LIGHT.parent)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines() == [
        "evalkit-lm-eval: error: lm-eval's tasks and scoring are not installed (no module 'lm_eval'); "
        "pip install 'evalkit-state[lmeval]'"
    ]
