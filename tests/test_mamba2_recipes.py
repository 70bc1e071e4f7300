"""`evalkit recipes` for the Mamba2 hybrids: the family comes from a local config or the hub id's
name; NemotronH, Granite-4.0-H, Bamba and Falcon-H1 are native (no --trust-remote-code) and get the
family's notes."""

from __future__ import annotations

import json

import pytest

from evalkit.commands import recipes


@pytest.mark.parametrize(
    "model, family",
    [
        ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "nemotron_h"),
        ("nvidia/Nemotron-H-8B-Base-8K", "nemotron_h"),
        ("ibm-granite/granite-4.0-h-small", "granitemoehybrid"),
        ("ibm-ai-platform/Bamba-9B-v2", "bamba"),
        ("tiiuae/Falcon-H1-7B-Instruct", "falcon_h1"),
        ("Qwen/Qwen3.5-9B", "qwen3_5"),
    ],
)
def test_family_from_the_name(model, family):
    assert recipes.model_family(model) == family


@pytest.mark.parametrize("model_type", ["nemotron_h", "granitemoehybrid", "bamba", "falcon_h1"])
def test_family_from_a_local_config(tmp_path, model_type):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    assert recipes.model_family(str(tmp_path)) == model_type


def test_nemotron_lines_and_notes():
    text = recipes.render(["vllm", "sglang", "atom"], ["fp32", "fp16"], "nvidia/Nemotron-H-8B-Base-8K", None,
                          "gsm8k", False)  # fmt: skip
    servers = [ln for ln in text.splitlines() if ln.endswith(" &")]
    assert len(servers) == 6 and not any("--trust-remote-code" in ln for ln in servers)
    assert "--mamba-ssm-cache-dtype float16" in text and "--mamba-ssm-dtype float32" in text
    assert "mamba_ssm_cache_dtype" in text and "does not know that it covers Mamba2 hybrids" in text
    assert "Qwen3.5 is a vision-language checkpoint" not in text  # not the GDN family's notes
