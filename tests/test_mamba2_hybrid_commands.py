"""The user-facing commands on the Mamba2 hybrids added in-process by issue 41 (tiny Bamba and
Falcon-H1 checkpoints saved by transformers): `evalkit run`, `evalkit drift` (whose state rows are
the Mamba2 layers) and `evalkit sweep` (one run per arm and the summary) all run them."""

from __future__ import annotations

import json

import pytest
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.cli import main as cli

COMMON = ["--tasks", "passkey", "--lengths", "1k", "--limit", "1", "--device", "cpu", "--no-progress"]


@pytest.fixture(scope="module", params=["bamba", "falcon_h1"])
def family(request):
    from evalkit.testing import tiny_mamba2_models as tiny

    build = {"bamba": tiny.build_tiny_bamba_checkpoint, "falcon_h1": tiny.build_tiny_falcon_h1_checkpoint}
    n_mamba2 = {"bamba": 2, "falcon_h1": 3}[request.param]  # Falcon-H1: every layer
    return request.param, build[request.param](checkpoint_cache_root(request) / request.param), n_mamba2


def test_run(family, tmp_path):
    name, ckpt, _ = family
    assert cli(["run", "--model", str(ckpt), "--arm", "bf16", "--out", str(tmp_path / "run"), *COMMON]) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["arm"]["state_dtype"] == "bf16" and manifest["model"]["config_hash"]
    (line,) = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert json.loads(line)["error"] is None


def test_drift(family, tmp_path):
    _, ckpt, n_mamba2 = family
    out = tmp_path / "drift"
    args = ["drift", "--model", str(ckpt), "--length", "200", "--generate", "8", "--prompt-length", "64"]
    args += ["--arms", "bf16", "--prompts", "2", "--chunk-size", "32", "--out", str(out)]
    assert cli(args + ["--no-plots", "--no-progress"]) == 0
    states = json.loads((out / "states.json").read_text())
    assert states and {row["layer"] for row in states} == set(range(n_mamba2))  # one row per Mamba2 layer
    assert max(row["rel_fro"] for row in states if row["arm"] == "bf16") > 0.0


def test_sweep(family, tmp_path):
    _, ckpt, _ = family
    out = tmp_path / "sweep"
    argv = ["sweep", "--model", str(ckpt), "--arms", "fp32,bf16", "--out", str(out), "--max-new-tokens", "4"]
    assert cli(argv + COMMON) == 0
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["baseline"] == "fp32" and {c["arm"] for c in summary["cells"]} == {"fp32", "bf16"}
