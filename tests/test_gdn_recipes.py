"""`evalkit recipes` for the Gated DeltaNet family: the family comes from a local config or the hub
id's name; Qwen models get no --trust-remote-code, Qwen3.5 (a VLM) runs text-only in vLLM, and the
notes are the family's."""

from __future__ import annotations

import json

import pytest

from evalkit.commands import recipes


@pytest.mark.parametrize(
    "model, family",
    [
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3_next"),
        ("Qwen/Qwen3.5-35B-A3B", "qwen3_5"),
        ("Qwen/Qwen3.5-0.8B", "qwen3_5"),
        ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "kimi"),
    ],
)
def test_family_from_the_name(model, family):
    assert recipes.model_family(model) == family


def test_family_from_a_local_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5_moe", "text_config": {}}))
    assert recipes.model_family(str(tmp_path)) == "qwen3_5"


def _server_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.endswith(" &")]


def test_qwen_lines_and_notes():
    qwen = recipes.render(
        ["vllm", "sglang", "atom"], ["fp32", "bf16"], "Qwen/Qwen3.5-9B", None, "gsm8k", False
    )
    lines = _server_lines(qwen)
    assert len(lines) == 6 and not any("--trust-remote-code" in ln for ln in lines)
    assert all("--language-model-only" in ln for ln in lines if ln.startswith("vllm"))
    assert "ATOM_GDN_SSM_DTYPE=bf16 " in qwen and "kimi_linear" not in qwen and "Qwen3.5" in qwen
    nxt = recipes.render(["vllm"], ["fp16"], "Qwen/Qwen3-Next-80B-A3B-Instruct", None, "gsm8k", False)
    assert "--language-model-only" not in _server_lines(nxt)[0] and "--mamba-ssm-cache-dtype float16" in nxt
    kimi = recipes.render(
        ["vllm", "sglang"], ["fp16"], "moonshotai/Kimi-Linear-48B-A3B-Instruct", None, "x", False
    )
    assert all("--trust-remote-code" in ln for ln in _server_lines(kimi)) and "kda_state_dtype" in kimi
    forced = recipes.render(["vllm"], ["fp16"], "/some/dir", None, "gsm8k", False, family="qwen3_5")
    assert "--language-model-only" in forced
