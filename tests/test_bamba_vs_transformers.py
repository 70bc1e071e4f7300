"""The engine on a Bamba checkpoint against transformers' own BambaForCausalLM on a tiny random
checkpoint saved by transformers (Mamba2, attention with half-rotary RoPE, Mamba2; a SwiGLU MLP in
every layer): logits of a full forward, of prefill + single-token steps, of several prefill chunks;
greedy generations; state formats bit-exact against the store oracle; batch invariance; bad
configs refused in one line."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.engine import LLMEngine
from evalkit.model.config import UnsupportedModelError
from evalkit.model.families import parse_any_config
from tests.helpers.drive import TOKENS, drive_logits
from tests.helpers.hybrid_parity import (
    assert_batch_invariant,
    assert_format_is_the_rounded_fp32_state,
    assert_greedy_matches_transformers,
)
from tests.helpers.loading import unused_tensors
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4


@pytest.fixture(scope="module")
def setup(request):
    from transformers import AutoModelForCausalLM

    from evalkit.testing.tiny_mamba2_models import build_tiny_bamba_checkpoint

    ckpt = build_tiny_bamba_checkpoint(checkpoint_cache_root(request) / "bamba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert type(hf).__name__ == "BambaForCausalLM"
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 150), generator=torch.Generator().manual_seed(7))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(tokens, use_cache=False).logits[0]
    assert ref.abs().max() > 1.0, "tiny model logits are too flat to be a useful oracle"
    return hf, engine, tokens[0].tolist(), ref


@pytest.mark.parametrize("prefill, n_decode", [([150], 0), ([97], 53), ([64, 1, 40, 17, 8], 20)])
def test_logits_match(setup, prefill, n_decode):
    _, engine, tokens, ref = setup
    assert sorted(engine.state.kda) == [0, 2] and sorted(engine.state.mla) == [1]
    assert engine.loaded.model.layers[1].mixer.rope.dim == 8  # half of head_dim 16
    assert rel_err(drive_logits(engine, tokens, prefill, n_decode), ref) <= REL_TOL


def test_the_rotary_width_matters(setup):
    """The oracle sees RoPE: the attention rotating all its dims instead of half misses it."""
    from evalkit.model.qwen3_next.rope import PartialRope

    _, engine, tokens, ref = setup
    attn = engine.loaded.model.layers[1].mixer
    half = attn.rope
    try:
        attn.rope = PartialRope(16, engine.arch.rope_theta, "cpu")
        assert rel_err(drive_logits(engine, tokens, [150], 0), ref) > 100 * REL_TOL
    finally:
        attn.rope = half


def test_greedy_generation_identical(setup):
    hf, engine, _, _ = setup
    assert_greedy_matches_transformers(hf, engine)


@pytest.mark.parametrize("arm", ["bf16", "fp8_e4m3-sr"])
def test_formats_equal_fp32_with_the_state_rounded_where_the_pool_stores(setup, arm):
    _, fp32, _, _ = setup
    assert_format_is_the_rounded_fp32_state(fp32, arm)


def test_batch_invariant(setup):
    _, fp32, _, _ = setup
    assert_batch_invariant(fp32)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, r"rope_type 'yarn' .*only 'default'"),
        ({"mamba_d_head": 8}, r"must equal mamba_expand x hidden_size \(128\)"),
        ({"mamba_n_groups": 3}, r"mamba_n_groups \(3\) must divide mamba_n_heads \(8\)"),
        ({"attn_layer_indices": [5]}, r"attn_layer_indices \[5\] are not layers 0..1"),
        ({"mlp_bias": True}, "bias-free projections only"),
        ({"time_step_limit": [0.0, 0.1]}, r"only \(0, inf\)"),
    ],
)
def test_unsupported_configs_are_one_line(change, words):
    base = {"model_type": "bamba", "hidden_size": 64, "mamba_n_heads": 8, "num_hidden_layers": 2}
    with pytest.raises(UnsupportedModelError, match=words) as e:
        parse_any_config({**base, **change})
    assert "\n" not in str(e.value)


def test_every_checkpoint_tensor_is_used(setup):
    _, engine, _, _ = setup
    assert unused_tensors(engine.loaded.path) == []


def test_tied_embeddings_without_an_lm_head_tensor(request):
    """tie_word_embeddings: transformers saves no lm_head; the engine reuses the embeddings."""
    from transformers import AutoModelForCausalLM

    from evalkit.model.checkpoint import TensorSource
    from evalkit.testing.tiny_mamba2_models import build_tiny_bamba_checkpoint

    ckpt = build_tiny_bamba_checkpoint(
        checkpoint_cache_root(request) / "bamba-tied", tie_word_embeddings=True
    )
    source = TensorSource(ckpt)
    assert "lm_head.weight" not in source.names()
    source.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
        with torch.no_grad():
            ref = hf(torch.tensor([TOKENS[:60]]), use_cache=False).logits[0]
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", max_num_seqs=1)
    assert rel_err(drive_logits(engine, TOKENS[:60], [40], 20), ref) <= REL_TOL
