"""The engine on a Granite-4.0-H (granitemoehybrid) checkpoint against transformers' own
GraniteMoeHybridForCausalLM on a tiny random checkpoint saved by transformers (Mamba2 and
attention layers without RoPE, softmax-routed MoE + shared MLP, every multiplier away from 1):
logits of a full forward, of prefill + single-token steps, of several prefill chunks; greedy
generations; state formats bit-exact against the store oracle; RoPE configs refused."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.engine import LLMEngine
from evalkit.model.config import UnsupportedModelError
from evalkit.model.families import parse_any_config
from tests.helpers.drive import drive_logits
from tests.helpers.hybrid_parity import (
    assert_format_is_the_rounded_fp32_state,
    assert_greedy_matches_transformers,
)
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4


@pytest.fixture(scope="module")
def setup(request):
    from transformers import AutoModelForCausalLM

    from evalkit.testing.tiny_mamba2_models import build_tiny_granite_hybrid_checkpoint

    ckpt = build_tiny_granite_hybrid_checkpoint(checkpoint_cache_root(request) / "granite-hybrid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert type(hf).__name__ == "GraniteMoeHybridForCausalLM"
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
    assert sorted(engine.state.kda) == [0, 1, 3] and sorted(engine.state.mla) == [2]
    assert rel_err(drive_logits(engine, tokens, prefill, n_decode), ref) <= REL_TOL


def test_greedy_generation_identical(setup):
    hf, engine, _, _ = setup
    assert_greedy_matches_transformers(hf, engine)


@pytest.mark.parametrize("arm", ["bf16", "fp8_e4m3-sr"])
def test_formats_equal_fp32_with_the_state_rounded_where_the_pool_stores(setup, arm):
    _, fp32, _, _ = setup
    assert_format_is_the_rounded_fp32_state(fp32, arm)


def test_rope_and_mismatched_heads_are_refused():
    base = {"model_type": "granitemoehybrid", "hidden_size": 64, "mamba_n_heads": 8, "num_hidden_layers": 1}
    with pytest.raises(UnsupportedModelError, match="without RoPE only"):
        parse_any_config({**base, "position_embedding_type": "rope"})
    with pytest.raises(UnsupportedModelError, match=r"must equal mamba_expand x hidden_size \(128\)"):
        parse_any_config({**base, "mamba_d_head": 8})
