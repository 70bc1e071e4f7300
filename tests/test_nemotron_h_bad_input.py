"""Bad Mamba2-family input gets one line naming what is supported (issue 41): a Mamba1 or another
Mamba2 hybrid's checkpoint, an unsupported block pattern, a finite time-step limit, missing or
mis-shaped weights; through `evalkit run` it is exit 2 without a traceback."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.cli import main as cli
from evalkit.errors import InputError
from evalkit.model.config import UnsupportedModelError
from evalkit.model.families import parse_any_config

BASE = {"model_type": "nemotron_h", "layers_block_type": ["linear_attention", "mlp"], "mamba_num_heads": 8,
        "n_groups": 2}  # fmt: skip


@pytest.mark.parametrize("model_type", ["mamba", "mamba2"])
def test_other_mamba_checkpoints_are_refused_naming_the_server_and_nemotron_h(model_type):
    with pytest.raises(UnsupportedModelError, match=r"through its server.*'nemotron_h'") as e:
        parse_any_config({"model_type": model_type})
    assert "\n" not in str(e.value)
    assert all(f"'{t}'" in str(e.value) for t in ("granitemoehybrid", "bamba", "falcon_h1"))


@pytest.mark.parametrize(
    "change, words",
    [
        (
            {"layers_block_type": ["linear_attention", "hybrid"]},
            "supported: linear_attention, full_attention",
        ),
        ({"layers_block_type": None, "hybrid_override_pattern": "M*X-"}, r"M \(Mamba2\), \* \(attention\)"),
        ({"time_step_limit": [1e-4, 0.1]}, r"finite time_step_limit.*only \(0, inf\)"),
        ({"n_groups": 3}, r"n_groups \(3\) must divide mamba_num_heads \(8\)"),
        ({"mamba_hidden_act": "gelu"}, "must be silu"),
        ({"use_bias": True}, "bias-free projections only"),
        (
            {"layers_block_type": ["linear_attention"], "num_hidden_layers": 2},
            "1 blocks, num_hidden_layers 2",
        ),
    ],
)
def test_unsupported_configs_are_one_line(change, words):
    raw = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(UnsupportedModelError, match=words) as e:
        parse_any_config(raw)
    assert "\n" not in str(e.value)


def test_legacy_pattern_and_names_parse():
    inf = {"__float__": "Infinity"}  # how config.json spells transformers' default limit
    raw = {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*E", "mamba_n_heads": 4,
           "mamba_n_groups": 2, "time_step_limit": [0.0, inf]}  # fmt: skip
    arch = parse_any_config(raw)
    assert arch.layer_types == ["linear_attention", "mlp", "linear_attention", "full_attention", "moe"]
    assert arch.kda_layers == [0, 2] and arch.mla_layers == [3] and arch.mamba_num_heads == 4


@pytest.fixture(scope="module")
def ckpt(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    return build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")


def _copy_without(ckpt, tmp_path, drop: str, replace=None):
    import torch
    from safetensors.torch import load_file, save_file

    out = tmp_path / "ckpt"
    shutil.copytree(ckpt, out)
    tensors = load_file(str(out / "model.safetensors"))
    tensors.pop(drop)
    if replace is not None:
        tensors[drop] = replace(torch)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_missing_weight_is_named(ckpt, tmp_path):
    from evalkit.model.loader import load_model

    bad = _copy_without(ckpt, tmp_path, "backbone.layers.4.mixer.conv1d.bias")
    with pytest.raises(InputError, match=r"missing tensor 'backbone.layers.4.mixer.conv1d.bias'"):
        load_model(bad, tokenizer=False)


def test_misshaped_weight_is_named(ckpt, tmp_path):
    from evalkit.model.loader import load_model

    bad = _copy_without(ckpt, tmp_path, "backbone.layers.0.mixer.D", lambda torch: torch.zeros(7))
    with pytest.raises(InputError, match=r"backbone.layers.0.mixer.D has shape \(7,\), expected \(8,\)"):
        load_model(bad, tokenizer=False)


def test_run_with_a_mamba1_checkpoint_is_exit_2(capsys, tmp_path):
    folder = tmp_path / "mamba1"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "mamba", "architectures": ["MambaForCausalLM"]})
    )
    rc = cli(["run", "--arm", "fp32", "--no-progress", "--model", str(folder), "--device", "cpu",
              "--tasks", "gsm8k", "--limit", "1", "--out", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "'nemotron_h'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
