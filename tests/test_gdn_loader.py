"""Loading Gated DeltaNet checkpoints: dispatch on model_type, config parsing and refusals (one
line, no traceback), a Qwen3.5 vision-language layout (text model under model.language_model,
vision tower and MTP head ignored), sharded safetensors."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
import torch
from gdn_fixtures import tiny_gdn
from safetensors.torch import load_file, save_file

from evalkit.errors import EvalkitError
from evalkit.model import UnsupportedModelError, load_model
from evalkit.model.families import parse_any_config
from evalkit.model.qwen3_next import GDNArch, Qwen3NextLM

NEXT = {"model_type": "qwen3_next", "num_hidden_layers": 8}


def test_defaults_follow_transformers():
    arch = parse_any_config(dict(NEXT))
    assert isinstance(arch, GDNArch) and arch.family == "qwen3_next"
    assert arch.mla_layers == [3, 7] and arch.kda_layers == [0, 1, 2, 4, 5, 6]
    assert arch.rotary_dim == 64 and arch.recurrent_state_shape == (32, 128, 128)
    assert arch.conv_dim == 2 * 16 * 128 + 32 * 128 and arch.mla_latent_dim == 2 * 2 * 256
    assert arch.mlp_layer_types == ["sparse"] * 8
    mixed = parse_any_config(
        {**NEXT, "mlp_only_layers": [1], "decoder_sparse_step": 2, "full_attention_interval": 2}
    )
    assert mixed.mlp_layer_types == ["dense"] * 3 + ["sparse", "dense"] * 2 + ["sparse"]
    assert mixed.mla_layers == [1, 3, 5, 7]


def test_vlm_config_reads_its_text_config():
    raw = {
        "model_type": "qwen3_5_moe",
        "tie_word_embeddings": True,
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "num_hidden_layers": 4,
            "num_experts": 8,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "mrope_section": [11, 11, 10]},
            "mamba_ssm_dtype": "float32",
        },
        "vision_config": {"depth": 2},
    }
    arch = parse_any_config(raw)
    assert arch.family == "qwen3_5_moe" and arch.num_experts == 8 and arch.norm_topk_prob
    assert arch.rope_theta == 1e7 and arch.tie_word_embeddings and arch.mlp_layer_types == ["sparse"] * 4
    dense = parse_any_config({"model_type": "qwen3_5_text", "num_hidden_layers": 4, "intermediate_size": 96})
    assert dense.mlp_layer_types == ["dense"] * 4 and dense.intermediate_size == 96


@pytest.mark.parametrize(
    "extra, needle",
    [
        ({"attention_bias": True}, "attention_bias"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope_type 'yarn'"),
        ({"linear_num_key_heads": 3, "linear_num_value_heads": 4}, "multiple of linear_num_key_heads"),
        ({"layer_types": ["linear_attention"] * 7 + ["sliding"]}, "unknown layer types"),
        ({"layer_types": ["linear_attention"] * 3}, "layer_types has 3 entries"),
        ({"attn_output_gate": False}, "attn_output_gate"),
    ],
)
def test_unsupported_configs_are_refused(extra, needle):
    with pytest.raises(UnsupportedModelError, match=needle):
        parse_any_config({**NEXT, **extra})


def test_quantized_checkpoints_are_refused():
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    with pytest.raises(UnsupportedModelError, match=r"quantized checkpoints \(fp8\)"):
        parse_any_config({**NEXT, "quantization_config": fp8})
    with pytest.raises(UnsupportedModelError, match="quantized"):
        parse_any_config({"model_type": "qwen3_5", "text_config": {"quantization_config": fp8}})


def test_unknown_model_type_names_both_families():
    with pytest.raises(UnsupportedModelError, match="Kimi-Linear and Qwen Gated DeltaNet"):
        parse_any_config({"model_type": "mamba2"})


def _logits(model, n: int = 40) -> torch.Tensor:
    from evalkit.engine import LLMEngine, SamplingParams, Sequence

    eng = LLMEngine(model, device="cpu")
    seq = Sequence(list(range(3, 3 + n)), SamplingParams())
    eng.runner.attach(seq)
    return eng.runner.prefill([(seq, n)], all_logits=True)[0]


def test_vlm_layout_and_shards_load_the_same_model(request, tmp_path):
    src = tiny_gdn(request, "qwen3_5")
    loaded = load_model(src)
    assert isinstance(loaded.model, Qwen3NextLM)
    want = _logits(loaded)
    dst = tmp_path / "vlm"
    shutil.copytree(src, dst)
    (dst / "model.safetensors").unlink()
    tensors = {
        k.replace("model.", "model.language_model.", 1): v
        for k, v in load_file(src / "model.safetensors").items()
    }
    tensors["model.visual.blocks.0.attn.qkv.weight"] = torch.zeros(3, 3)
    tensors["mtp.fc.weight"] = torch.zeros(2, 2)
    names = sorted(tensors)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    for fname, keys in shards.items():
        save_file({k: tensors[k].contiguous() for k in keys}, str(dst / fname))
    index = {"weight_map": {k: f for f, keys in shards.items() for k in keys}}
    (dst / "model.safetensors.index.json").write_text(json.dumps(index))
    text = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(
        json.dumps({"model_type": "qwen3_5", "text_config": text, "vision_config": {}})
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the vision tower and MTP head are ignored silently
        again = load_model(dst)
    assert torch.equal(_logits(again), want)


def test_missing_tensor_is_named(request, tmp_path):
    src = tiny_gdn(request, "qwen3_next")
    dst = tmp_path / "broken"
    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    del tensors["model.layers.2.linear_attn.in_proj_ba.weight"]
    save_file(tensors, str(dst / "model.safetensors"))
    with pytest.raises(EvalkitError, match="layers.2.linear_attn.in_proj_ba.weight"):
        load_model(dst, tokenizer=False)


@pytest.mark.parametrize(
    "cls, model_type",
    [
        ("Qwen3NextConfig", "qwen3_next"),
        ("Qwen3_5TextConfig", "qwen3_5_text"),
        ("Qwen3_5MoeTextConfig", "qwen3_5_moe_text"),
    ],
)
def test_absent_fields_default_like_transformers(cls, model_type):
    import transformers

    hf = getattr(transformers, cls)()
    arch = parse_any_config({"model_type": model_type})
    for name in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_key_value_heads",
        "head_dim",
        "num_experts",
    ):
        if hasattr(hf, name):
            assert getattr(arch, name) == getattr(hf, name), name
    assert arch.layer_types == hf.layer_types


@pytest.mark.parametrize(
    "name, billions", [("qwen3-next-80b-a3b", 80), ("qwen3.5-35b-a3b", 35), ("qwen3.5-27b", 27)]
)
def test_real_configs_have_the_released_sizes(name, billions):
    from evalkit.model.qwen3_next.random_init import real_gdn_config

    arch = parse_any_config(real_gdn_config(name))
    with torch.device("meta"):
        n = sum(p.numel() for p in Qwen3NextLM(arch, torch.bfloat16, "meta").parameters())
    assert abs(n / 1e9 - billions) / billions < 0.04, n
    cut = parse_any_config(real_gdn_config(name, num_layers=10))
    assert cut.num_hidden_layers == 12 and cut.mla_layers == [3, 7, 11]


def test_random_model_runs_in_the_engine():
    from evalkit.engine import LLMEngine, SamplingParams
    from evalkit.model import LoadedModel
    from evalkit.model.qwen3_next.random_init import random_gdn_model

    raw = {"model_type": "qwen3_5_moe_text", "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 4}
    raw |= {"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "linear_num_key_heads": 1}
    raw |= {
        "linear_num_value_heads": 2,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "num_experts": 4,
    }
    raw |= {"num_experts_per_tok": 2, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16}
    arch = parse_any_config(raw)
    lm = random_gdn_model(arch, "cpu", torch.float32, std=0.2)
    dt = lm.layers[0].attn.dt_bias.view(2, 8)
    assert torch.equal(dt, dt[:, :1].expand(2, 8))  # one gate input per head
    eng = LLMEngine(LoadedModel(lm, arch, None, None, raw), device="cpu")
    out = eng.generate([[5, 6, 7]], SamplingParams(max_new_tokens=5, ignore_eos=True), use_tqdm=False)
    assert out[0].n_generated == 5


def test_tied_embeddings_without_lm_head(request, tmp_path):
    from transformers import AutoModelForCausalLM

    from evalkit.testing.tiny_gdn_models import build_tiny_gdn_checkpoint

    ckpt = build_tiny_gdn_checkpoint(tmp_path / "tied", "qwen3_5", tie_word_embeddings=True)
    assert "lm_head.weight" not in load_file(ckpt / "model.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
        with torch.no_grad():
            ref = hf(torch.arange(3, 43)[None], use_cache=False).logits[0]
    got = _logits(load_model(ckpt))
    assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()


@pytest.mark.parametrize("transposed", [False, True])
def test_fused_experts_load_like_per_expert_ones(tmp_path, transposed):
    from evalkit.testing.tiny_gdn_models import build_tiny_gdn_checkpoint

    # 2I != hidden: a transposed [E, in, out] export is told apart by its shape
    src = build_tiny_gdn_checkpoint(tmp_path / "moe", "qwen3_5_moe", moe_intermediate_size=24)
    want = _logits(load_model(src, tokenizer=False))
    dst = tmp_path / "fused"
    shutil.copytree(src, dst)
    tensors = load_file(src / "model.safetensors")
    for i in range(4):
        p = f"model.layers.{i}.mlp.experts"
        gate_up = torch.stack(
            [torch.cat([tensors.pop(f"{p}.{e}.{n}_proj.weight") for n in ("gate", "up")]) for e in range(4)]
        )
        down = torch.stack([tensors.pop(f"{p}.{e}.down_proj.weight") for e in range(4)])
        if transposed:
            gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
        tensors[f"{p}.gate_up_proj"], tensors[f"{p}.down_proj"] = gate_up.contiguous(), down.contiguous()
    save_file(tensors, str(dst / "model.safetensors"))
    assert torch.equal(_logits(load_model(dst, tokenizer=False)), want)
