"""Tiny random Mamba2-hybrid checkpoints (NemotronH, Granite-4.0-H, Bamba, Falcon-H1) for tests,
built with transformers' own classes and the byte-level tokenizer of `tiny_models`.

`build_tiny_nemotron_h_checkpoint(path)`: blocks "ME*-M-" (Mamba2, MoE, attention, MLP, Mamba2,
MLP; mamba2.md §9), 8 Mamba heads of 16 x 8 state in 2 groups, conv with bias, 4 experts top 2.
At transformers' init the SSM branch is negligible next to D x (in_proj std 0.02), so in_proj is
redrawn with std 0.3 and the 1-D parameters (norms, A_log, dt_bias, D, conv bias) are perturbed:
every weight path, and the stored state, moves the logits. Builds are cached by their arguments.

`build_tiny_granite_hybrid_checkpoint(path)`: layers Mamba2, Mamba2, attention, Mamba2 (no RoPE),
each with 4 experts top 2 and a shared MLP, Granite's multipliers away from 1, perturbed the same way.

`build_tiny_bamba_checkpoint(path)`: layers Mamba2, attention (half-rotary RoPE, theta 500 so
positions matter within the test's lengths), Mamba2, each with a SwiGLU MLP, perturbed the same way.

`build_tiny_falcon_h1_checkpoint(path)`: 3 hybrid layers (Mamba2 and attention side by side), 6
Mamba heads over `mamba_d_ssm` 96 (not expand x hidden), 2 attention heads of an explicit head_dim
16 (not hidden / heads), every muP multiplier away from 1 and distinct, the gated RMSNorm on
(`mamba_rms_norm`; overrides choose the other gate orders), perturbed the same way."""

from __future__ import annotations

import os
from pathlib import Path

from .build_once import build_once
from .tiny_models import BOS, EOS, PAD, build_tokenizer

_BUILDER_VERSION = 1
BLOCKS = ["linear_attention", "moe", "full_attention", "mlp", "linear_attention", "mlp"]


def tiny_nemotron_h_config(vocab_size: int, tok, **overrides):
    from transformers import NemotronHConfig

    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        layers_block_type=list(BLOCKS),
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        mamba_num_heads=8,
        mamba_head_dim=16,
        ssm_state_size=8,
        n_groups=2,
        conv_kernel=4,
        chunk_size=8,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        moe_shared_expert_intermediate_size=32,
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    kwargs.update(overrides)
    return NemotronHConfig(**kwargs)


def tiny_nemotron_h_model(cfg):
    """transformers' own NemotronHForCausalLM with random weights whose SSM branch matters."""
    from transformers import NemotronHForCausalLM

    return _perturbed(NemotronHForCausalLM(cfg))


def _perturbed(model):
    """in_proj redrawn with std 0.3, the 1-D parameters shifted by N(0, 0.2^2)."""
    import torch

    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("in_proj.weight"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model.eval()


def tiny_granite_hybrid_config(vocab_size: int, tok, **overrides):
    from transformers import GraniteMoeHybridConfig

    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=4,
        layer_types=["mamba", "mamba", "attention", "mamba"],
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        shared_intermediate_size=48,
        num_local_experts=4,
        num_experts_per_tok=2,
        mamba_n_heads=8,
        mamba_d_head=16,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=8,
        embedding_multiplier=2.0,
        residual_multiplier=0.5,
        attention_multiplier=0.2,
        logits_scaling=0.5,
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    kwargs.update(overrides)
    return GraniteMoeHybridConfig(**kwargs)


def build_tiny_granite_hybrid_checkpoint(
    path: str | os.PathLike, seed: int = 0, vocab_size: int = 512
) -> Path:
    """Write (or reuse) a tiny Granite-4.0-H checkpoint at `path`."""
    import torch
    from transformers import GraniteMoeHybridForCausalLM

    stamp = {"v": _BUILDER_VERSION, "family": "granitemoehybrid", "seed": seed, "vocab_size": vocab_size}

    def build(folder: Path) -> None:
        tok = build_tokenizer(folder, vocab_size)
        cfg = tiny_granite_hybrid_config(vocab_size, tok)
        torch.manual_seed(seed)
        _perturbed(GraniteMoeHybridForCausalLM(cfg)).eval().save_pretrained(str(folder))

    return build_once(Path(path), stamp, build)


def _build_cached(
    path: str | os.PathLike, family: str, config_of, model_of, seed: int, vocab_size: int, overrides: dict
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny `family` checkpoint:
    `config_of(vocab_size, tok, **overrides)` then `model_of(config)` under `seed`."""
    import torch

    stamp = {
        "v": _BUILDER_VERSION,
        "family": family,
        "seed": seed,
        "vocab_size": vocab_size,
        "overrides": {k: repr(v) for k, v in sorted(overrides.items())},
    }

    def build(folder: Path) -> None:
        tok = build_tokenizer(folder, vocab_size)
        cfg = config_of(vocab_size, tok, **overrides)
        torch.manual_seed(seed)
        model_of(cfg).save_pretrained(str(folder))

    return build_once(Path(path), stamp, build)


def build_tiny_nemotron_h_checkpoint(
    path: str | os.PathLike, seed: int = 0, vocab_size: int = 512, **overrides
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny checkpoint at `path`."""
    return _build_cached(
        path, "nemotron_h", tiny_nemotron_h_config, tiny_nemotron_h_model, seed, vocab_size, overrides
    )


def tiny_bamba_config(vocab_size: int, tok, **overrides):
    from transformers import BambaConfig

    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=3,
        attn_layer_indices=[1],
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        mamba_n_heads=8,
        mamba_d_head=16,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=8,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5},
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    kwargs.update(overrides)
    return BambaConfig(**kwargs)


def build_tiny_bamba_checkpoint(
    path: str | os.PathLike, seed: int = 0, vocab_size: int = 512, **overrides
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny Bamba checkpoint."""
    from transformers import BambaForCausalLM

    model_of = lambda cfg: _perturbed(BambaForCausalLM(cfg))  # noqa: E731
    return _build_cached(path, "bamba", tiny_bamba_config, model_of, seed, vocab_size, overrides)


def tiny_falcon_h1_config(vocab_size: int, tok, **overrides):
    from transformers import FalconH1Config

    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        intermediate_size=96,
        mamba_n_heads=6,
        mamba_d_ssm=96,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_d_conv=4,
        mamba_chunk_size=8,
        mamba_rms_norm=True,
        mamba_norm_before_gate=True,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        embedding_multiplier=1.5,
        lm_head_multiplier=0.7,
        key_multiplier=1.3,
        attention_in_multiplier=0.8,
        attention_out_multiplier=0.6,
        ssm_in_multiplier=1.2,
        ssm_out_multiplier=0.9,
        ssm_multipliers=[0.5, 1.4, 0.8, 1.1, 0.6],
        mlp_multipliers=[1.25, 0.75],
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    kwargs.update(overrides)
    return FalconH1Config(**kwargs)


def build_tiny_falcon_h1_checkpoint(
    path: str | os.PathLike, seed: int = 0, vocab_size: int = 512, **overrides
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny Falcon-H1 checkpoint."""
    from transformers import FalconH1ForCausalLM

    model_of = lambda cfg: _perturbed(FalconH1ForCausalLM(cfg))  # noqa: E731
    return _build_cached(path, "falcon_h1", tiny_falcon_h1_config, model_of, seed, vocab_size, overrides)
