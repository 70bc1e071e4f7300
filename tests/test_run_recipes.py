"""`evalkit recipes` prints, per engine and arm, the server flag that sets the recurrent-state
dtype and an `evalkit run` line that `evalkit run` itself accepts; the scripts are valid bash."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.commands import recipes, run

REPO = Path(__file__).resolve().parents[1]
FLAGS = {
    "vllm": "--mamba-ssm-cache-dtype {long}",
    "sglang": "--mamba-ssm-dtype {long}",
    "atom": "ATOM_GDN_SSM_DTYPE={arm} ",
}


@pytest.mark.parametrize("engine", sorted(FLAGS))
def test_each_arm_gets_its_engine_flag_and_a_valid_run_line(engine):
    text = recipes.render([engine], list(recipes.ARMS), "org/Model", None, "gsm8k,passkey", True)
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    for arm in recipes.ARMS:
        flag = FLAGS[engine].format(arm=arm, long=recipes.LONG_NAMES[arm])
        server = [ln for ln in text.splitlines() if flag in ln and not ln.startswith("evalkit")]
        assert len(server) == 1, (engine, arm)
        line = next(
            ln for ln in text.splitlines() if ln.startswith("evalkit run") and f"--arm {engine}-{arm}" in ln
        )
        args = parser.parse_args(shlex.split(line)[2:])
        assert args.arm == f"{engine}-{arm}" and args.out == f"runs/{engine}-{arm}"
        assert args.server == [f"http://127.0.0.1:{recipes.ENGINES[engine].default_port}"]
        assert args.arm_note == recipes.ENGINES[engine].note(arm)
        assert (recipes.LONG_NAMES[arm] if engine != "atom" else f"={arm}") in args.arm_note
    assert f"evalkit compare runs/{engine}-fp32 runs/{engine}-bf16" in text


def test_cli_and_scripts():
    out = subprocess.run(
        [sys.executable, "-m", "evalkit", "recipes", "--engine", "sglang", "--arm", "fp16", "--port", "9000"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "--mamba-ssm-dtype float16" in out.stdout and ":9000" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "evalkit", "recipes", "--port", "70000"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "not a TCP port" in bad.stderr
    for script in (REPO / "scripts" / "recipes").glob("*.sh"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script
