"""Checkpoint loading: the layer pattern from the config's lists, refused model types, missing
files, both spellings of layer 0's dense MLP, transformers' in-memory names, sharded safetensors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.errors import EvalkitError
from evalkit.model import UnsupportedModelError, load_model, parse_config


def _cfg(**kw):
    base = {"model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 5}
    base.update(kw)
    return base


def test_layer_pattern_comes_from_the_1_indexed_lists():
    arch = parse_config(
        _cfg(
            linear_attn_config={
                "full_attn_layers": [2, 5],
                "kda_layers": [1, 3, 4],
                "num_heads": 4,
                "head_dim": 16,
            }
        )
    )
    assert arch.mla_layers == [1, 4] and arch.kda_layers == [0, 2, 3]
    assert (arch.linear_num_heads, arch.linear_head_dim) == (4, 16)
    # the real 48B pattern: MLA at 0-based 3, 7, ..., 23 and the last layer
    real = parse_config(
        _cfg(
            num_hidden_layers=27,
            linear_attn_config={
                "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
                "kda_layers": [i for i in range(1, 28) if i not in (4, 8, 12, 16, 20, 24, 27)],
            },
        )
    )
    assert real.mla_layers == [3, 7, 11, 15, 19, 23, 26]
    assert real.mlp_layer_types == ["dense"] + ["sparse"] * 26
    explicit = parse_config(_cfg(num_hidden_layers=2, layer_types=["full_attention", "linear_attention"]))
    assert explicit.mla_layers == [0]


def test_checkpoint_spellings_of_config_keys():
    arch = parse_config(
        _cfg(
            num_experts=16,
            num_experts_per_token=4,
            moe_renormalize=False,
            num_shared_experts=2,
            eos_token_id=7,
            first_k_dense_replace=2,
        )
    )
    assert (arch.num_local_experts, arch.num_experts_per_tok, arch.norm_topk_prob) == (16, 4, False)
    assert arch.n_shared_experts == 2 and arch.eos_token_id == [7]
    assert arch.mlp_layer_types[:3] == ["dense", "dense", "sparse"]


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({"model_type": "llama"}, "model_type 'llama' is not supported"),
        ({"model_type": "qwen3_next"}, "Kimi-Linear"),
        (_cfg(architectures=["KimiForVision"]), "architectures"),
        (_cfg(linear_attn_config={"full_attn_layers": [1], "kda_layers": [2]}), "neither"),
        (_cfg(q_lora_rank=64), "q_lora_rank"),
    ],
)
def test_unsupported_configs_are_refused(raw, needle):
    with pytest.raises(UnsupportedModelError, match=needle):
        parse_config(raw)


def test_bad_model_paths_are_clear_errors(tmp_path, tiny_hybrid_ckpt):
    with pytest.raises(EvalkitError, match="does not exist"):
        load_model(tmp_path / "nope")
    with pytest.raises(EvalkitError, match="no config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mistral"}))
    with pytest.raises(EvalkitError, match="not supported"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text((Path(tiny_hybrid_ckpt) / "config.json").read_text())
    with pytest.raises(EvalkitError, match="no \\*.safetensors"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EvalkitError, match="not valid JSON"):
        load_model(tmp_path)


def _copy_with_tensors(src: Path, dst: Path, tensors: dict[str, torch.Tensor]) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json"))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(dst / "model.safetensors"))
    return dst


def _logits(path_or_loaded, tokens: list[int]) -> torch.Tensor:
    eng = LLMEngine(path_or_loaded, device="cpu", max_num_seqs=2)
    out = eng.loglikelihood([(tokens[:10], tokens[10:])])
    return torch.tensor(out[0][0])


TOKENS = list(range(5, 45))


@pytest.fixture(scope="module")
def reference_logprob(tiny_hybrid_ckpt):
    return _logits(str(tiny_hybrid_ckpt), TOKENS)


def test_dense_mlp_under_mlp_prefix(tmp_path, tiny_hybrid_ckpt, reference_logprob):
    t = load_file(str(Path(tiny_hybrid_ckpt) / "model.safetensors"))
    renamed = {k.replace("layers.0.block_sparse_moe.", "layers.0.mlp."): v for k, v in t.items()}
    assert "model.layers.0.mlp.gate_proj.weight" in renamed
    dst = _copy_with_tensors(Path(tiny_hybrid_ckpt), tmp_path / "ckpt", renamed)
    assert torch.equal(_logits(str(dst), TOKENS), reference_logprob)


def test_transformers_in_memory_names(tmp_path, tiny_hybrid_ckpt, reference_logprob):
    """conv1d.weight, forget_gate.*, experts.gate_up_proj/down_proj, mlp.* (a state_dict dump)."""
    from transformers import KimiLinearForCausalLM

    hf = KimiLinearForCausalLM.from_pretrained(tiny_hybrid_ckpt, dtype=torch.float32)
    sd = dict(hf.state_dict())
    assert any("forget_gate" in k for k in sd) and any("experts.gate_up_proj" in k for k in sd)
    dst = _copy_with_tensors(Path(tiny_hybrid_ckpt), tmp_path / "ckpt", sd)
    assert torch.allclose(_logits(str(dst), TOKENS), reference_logprob, rtol=1e-6, atol=0)


def test_sharded_checkpoint(tmp_path, tiny_hybrid_ckpt, reference_logprob):
    t = load_file(str(Path(tiny_hybrid_ckpt) / "model.safetensors"))
    dst = tmp_path / "sharded"
    shutil.copytree(tiny_hybrid_ckpt, dst, ignore=shutil.ignore_patterns("*.safetensors"))
    names = sorted(t)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for fname, keys in shards.items():
        save_file({k: t[k] for k in keys}, str(dst / fname))
        weight_map.update({k: fname for k in keys})
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert torch.equal(_logits(str(dst), TOKENS), reference_logprob)
    (dst / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(EvalkitError, match="missing"):
        load_model(dst)


def test_missing_tensor_is_named(tmp_path, tiny_hybrid_ckpt):
    t = load_file(str(Path(tiny_hybrid_ckpt) / "model.safetensors"))
    del t["model.layers.2.self_attn.dt_bias"]
    dst = _copy_with_tensors(Path(tiny_hybrid_ckpt), tmp_path / "ckpt", t)
    with pytest.raises(EvalkitError, match="layers.2.self_attn.dt_bias"):
        load_model(dst)


def test_tokenizer_and_pure_kda_load(tiny_pure_kda_ckpt):
    loaded = load_model(tiny_pure_kda_ckpt)
    assert loaded.arch.mla_layers == [] and len(loaded.arch.kda_layers) == 4
    assert loaded.tokenizer.eos_token_id in loaded.arch.eos_token_id
    eng = LLMEngine(loaded, device="cpu")
    assert (
        eng.state.mla == {}
        and eng.generate(["hello"], SamplingParams(max_new_tokens=4), use_tqdm=False)[0].n_generated <= 4
    )


def test_transformers_bridge_shares_the_engine_weights(tiny_hybrid_ckpt):
    """evalkit.model.hf_bridge (used by the GPU benchmark) gives transformers' exact logits."""
    from transformers import KimiLinearForCausalLM

    from evalkit.model.hf_bridge import transformers_model

    lm = load_model(tiny_hybrid_ckpt, tokenizer=False).model
    hf = transformers_model(lm)
    assert hf.model.layers[0].self_attn.q_proj.weight.data_ptr() == lm.layers[0].attn.in_proj.data_ptr()
    ref = KimiLinearForCausalLM.from_pretrained(tiny_hybrid_ckpt, dtype=torch.float32).eval()
    ids = torch.randint(3, 512, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(hf(ids, use_cache=False).logits, ref(ids, use_cache=False).logits)


def test_random_model_runs_in_the_engine(tiny_hybrid_ckpt):
    """Random weights made in place (the benchmark's real-size model, here at tiny size)."""
    from evalkit.model import LoadedModel, random_model

    arch = load_model(tiny_hybrid_ckpt, tokenizer=False).arch
    lm = random_model(arch, "cpu", torch.float32, seed=1, std=0.08)
    eng = LLMEngine(LoadedModel(lm, arch, None, Path("random"), {}), device="cpu")
    outs = eng.generate(
        [[5, 6, 7], list(range(3, 40))], SamplingParams(max_new_tokens=6, ignore_eos=True), use_tqdm=False
    )
    assert [o.n_generated for o in outs] == [6, 6] and not any(o.flags for o in outs)
    assert len(set(outs[1].token_ids)) > 1


def test_hub_ids_go_through_snapshot_download(monkeypatch, tiny_hybrid_ckpt):
    import huggingface_hub

    calls = []

    def fake_download(repo_id, allow_patterns):
        calls.append(repo_id)
        if repo_id == "someorg/tiny":
            return str(tiny_hybrid_ckpt)
        raise OSError("Repository Not Found")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    assert load_model("someorg/tiny", tokenizer=False).arch.mla_layers == [3]
    with pytest.raises(EvalkitError, match="neither a local directory nor a downloadable hub id"):
        load_model("someorg/missing")
    assert calls == ["someorg/tiny", "someorg/missing"]
