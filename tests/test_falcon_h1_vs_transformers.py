"""The engine on a Falcon-H1 checkpoint against transformers' own FalconH1ForCausalLM on tiny random
checkpoints saved by transformers (every layer Mamba2 and attention side by side; mamba_d_ssm and
head_dim given explicitly; every muP multiplier away from 1): logits of a full forward, of prefill
+ single-token steps, of several prefill chunks, for the three gate orders; each multiplier seen
by the oracle; greedy generations; state formats bit-exact against the store oracle; batch
invariance; bad configs refused in one line."""

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
    assert_batch_invariant,
    assert_format_is_the_rounded_fp32_state,
    assert_greedy_matches_transformers,
)
from tests.helpers.loading import unused_tensors
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4
# the default checkpoint: gated RMSNorm, norm before gate; the others: transformers' two other paths
GATES = {
    "norm-then-gate": {},
    "no-norm": {"mamba_rms_norm": False},
    "gate-then-norm": {"mamba_norm_before_gate": False},
}


def _setup(request, name: str):
    from transformers import AutoModelForCausalLM

    from evalkit.testing.tiny_mamba2_models import build_tiny_falcon_h1_checkpoint

    ckpt = build_tiny_falcon_h1_checkpoint(
        checkpoint_cache_root(request) / f"falcon-h1-{name}", **GATES[name]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert type(hf).__name__ == "FalconH1ForCausalLM"
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 150), generator=torch.Generator().manual_seed(7))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(tokens, use_cache=False).logits[0]
    assert ref.abs().max() > 1.0, "tiny model logits are too flat to be a useful oracle"
    return hf, engine, tokens[0].tolist(), ref


@pytest.fixture(scope="module")
def setup(request):
    return _setup(request, "norm-then-gate")


@pytest.mark.parametrize("prefill, n_decode", [([150], 0), ([97], 53), ([64, 1, 40, 17, 8], 20)])
def test_logits_match(setup, prefill, n_decode):
    _, engine, tokens, ref = setup
    assert sorted(engine.state.kda) == sorted(engine.state.mla) == [0, 1, 2]  # every layer both
    assert tuple(engine.state.kda[0].shape[1:]) == (6, 16, 8)  # [H, P = mamba_d_ssm / H, N]
    assert rel_err(drive_logits(engine, tokens, prefill, n_decode), ref) <= REL_TOL


@pytest.mark.parametrize("gate", ["no-norm", "gate-then-norm"])
def test_the_other_gate_orders_match(request, gate):
    _, engine, tokens, ref = _setup(request, gate)
    assert (engine.loaded.model.layers[0].mamba.norm is None) == (gate == "no-norm")
    assert rel_err(drive_logits(engine, tokens, [97], 53), ref) <= REL_TOL
    assert unused_tensors(engine.loaded.path) == []


def test_every_checkpoint_tensor_is_used(setup):
    _, engine, _, _ = setup
    assert unused_tensors(engine.loaded.path) == []


MULTIPLIERS = [
    ("mamba", "in_multiplier"),
    ("", "ssm_out"),
    ("", "attn_in"),
    ("", "attn_out"),
    ("self_attn", "key_multiplier"),
    ("feed_forward", "gate_multiplier"),
    ("feed_forward", "down_multiplier"),
]


@pytest.mark.parametrize("module, name", MULTIPLIERS)
def test_each_multiplier_is_seen_by_the_oracle(setup, module, name):
    """Setting one multiplier back to 1 in every layer misses transformers by far."""
    _, engine, tokens, ref = setup
    owners = [layer.get_submodule(module) for layer in engine.loaded.model.layers]
    saved = [getattr(o, name) for o in owners]
    assert all(v != 1.0 for v in saved)
    try:
        for o in owners:
            setattr(o, name, 1.0)
        assert rel_err(drive_logits(engine, tokens, [150], 0), ref) > 100 * REL_TOL
    finally:
        for o, v in zip(owners, saved):
            setattr(o, name, v)


@pytest.mark.parametrize("name", ["mup", "embedding_multiplier", "lm_head_multiplier"])
def test_the_mup_rows_and_model_multipliers_are_seen_by_the_oracle(setup, name):
    _, engine, tokens, ref = setup
    lm = engine.loaded.model
    if name == "mup":
        owners = [layer.mamba for layer in lm.layers]
        saved = [o.mup for o in owners]
        new = [torch.ones_like(v) for v in saved]
    else:
        owners, saved, new = [lm.arch], [getattr(lm.arch, name)], [1.0]
    try:
        for o, v in zip(owners, new):
            setattr(o, name, v)
        assert rel_err(drive_logits(engine, tokens, [150], 0), ref) > 100 * REL_TOL
    finally:
        for o, v in zip(owners, saved):
            setattr(o, name, v)


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
        ({"mamba_d_head": 8}, r"must equal mamba_d_ssm \(96\)"),
        ({"mamba_d_ssm": None, "mamba_d_head": 8}, r"must equal mamba_expand x hidden_size \(128\)"),
        ({"ssm_multipliers": [1.0, 1.0]}, "ssm_multipliers must be a list of 5 numbers"),
        ({"projectors_bias": True}, "bias-free projections only"),
        ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}, r"rope_type 'llama3' .*only 'default'"),
        ({"time_step_limit": [0.001, 0.1]}, r"only \(0, inf\)"),
    ],
)
def test_unsupported_configs_are_one_line(change, words):
    base = {"model_type": "falcon_h1", "hidden_size": 64, "mamba_n_heads": 6, "mamba_d_ssm": 96}
    with pytest.raises(UnsupportedModelError, match=words) as e:
        parse_any_config({**base, **change})
    assert "\n" not in str(e.value)


def test_absent_mamba_d_ssm_is_transformers_default():
    """transformers' FalconH1Config fills an absent mamba_d_ssm with 1024, not expand x hidden."""
    from transformers import FalconH1Config

    raw = {"model_type": "falcon_h1", "hidden_size": 64, "mamba_n_heads": 8}
    arch = parse_any_config(raw)
    cfg = FalconH1Config(hidden_size=64, mamba_n_heads=8)
    assert (arch.mamba_inner, arch.mamba_head_dim) == (cfg.mamba_d_ssm, cfg.mamba_d_head) == (1024, 128)
