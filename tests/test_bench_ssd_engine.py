"""scripts/bench_ssd.py's engine section: --engine-arms runs the positive-control arms (fp8_e4m3,
m3-rtz) besides fp32 on the CPU smoke path, each arm's row lands in the JSON, bad options exit 2 in
one line; and the committed 48B-class config parses to Nemotron-H-47B's parameter count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_ssd.py"
CONFIG_48B = ROOT / "results" / "nemotron-h-48b-h200" / "config.json"


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path),
            "--skip", "correctness,copy,decode,prefill", *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def test_engine_arms_include_positive_controls(tmp_path):
    arms = ["fp32", "fp8_e4m3", "m3-rtz"]
    p = _run(tmp_path, "--engine-arms", ",".join(arms), "--engine-workload", "2,24,2")
    assert p.returncode == 0, p.stderr[-2000:]
    engine = json.loads((tmp_path / "bench_ssd.json").read_text())["sections"]["engine"]
    assert list(engine["arms"]) == arms
    assert engine["workload"] == {"prompts": 2, "prompt_len": 24, "new_tokens": 2}
    for arm in arms:
        row = engine["arms"][arm]
        assert "error" not in row, row
        # Counts, not the rate: a busy machine may round two tokens' rate to 0. The first token
        # of each prompt comes from its prefill, so 2 prompts x 1 decode step.
        assert row["max_batch"] == 2 and row["decode_tokens"] == 2 * 1
        assert ("mean_token_agreement_vs_fp32" in row) == (arm != "fp32")
    md = (tmp_path / "bench_ssd.md").read_text()
    assert all(f"| {arm} |" in md for arm in arms)


def test_bad_engine_options_exit_2_in_one_line(tmp_path):
    for extra in (
        ["--engine-arms", "fp16,fp32"],
        ["--engine-arms", "fp32,nope"],
        ["--engine-workload", "2,24"],
    ):
        p = _run(tmp_path, *extra)
        assert p.returncode == 2, (extra, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def _expected_params(c: dict) -> int:
    """Nemotron-H's parameters by arithmetic from the config (transformers' NemotronH layout)."""
    d, blocks = c["hidden_size"], c["hybrid_override_pattern"]
    H, P, N, G, K = (
        c["mamba_num_heads"],
        c["mamba_head_dim"],
        c["ssm_state_size"],
        c["n_groups"],
        c["conv_kernel"],
    )
    inner, conv_dim = H * P, H * P + 2 * G * N
    mamba = d * (2 * inner + 2 * G * N + H) + conv_dim * K + conv_dim + 3 * H + inner + inner * d
    mlp = 2 * d * c["intermediate_size"]
    hd, kv = c["head_dim"], c["num_key_value_heads"]
    attn = 2 * d * c["num_attention_heads"] * hd + 2 * d * kv * hd
    per = {"M": mamba, "-": mlp, "*": attn}
    return 2 * c["vocab_size"] * d + d + sum(per[b] + d for b in blocks)


def test_48b_config_parses_to_47b_params():
    from evalkit.model.families import parse_any_config
    from evalkit.model.nemotron_h.model import NemotronHLM

    raw = json.loads(CONFIG_48B.read_text())
    arch = parse_any_config(raw)
    assert arch.num_hidden_layers == 98 and arch.layer_types.count("linear_attention") == 45
    assert arch.layer_types.count("full_attention") == 5 and arch.layer_types.count("mlp") == 48
    lm = NemotronHLM(arch, torch.bfloat16, "meta")  # shapes only: no 94 GB allocation
    n = sum(p.numel() for p in lm.parameters())
    assert n == _expected_params(raw)
    assert 46.0e9 < n < 48.0e9
