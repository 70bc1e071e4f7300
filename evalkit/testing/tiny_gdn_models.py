"""Tiny random Gated DeltaNet checkpoints (Qwen3-Next, Qwen3.5, Qwen3.5-MoE) for tests, built
with transformers' own classes and the byte-level tokenizer of `tiny_models`.

`build_tiny_gdn_checkpoint(path, family)`: 4 layers (GDN at 0-2, gated attention at 3), 2 key
heads and 4 value heads (grouped value heads), partial RoPE; Qwen3-Next has 4 experts top 2 with
a shared expert and a dense layer 1 (`mlp_only_layers`), Qwen3.5-MoE all MoE, Qwen3.5 all dense.
The 1-D parameters (norm weights, A_log, dt_bias) are perturbed so every weight path matters.
Builds are cached by their arguments, and built beside the target then moved in."""

from __future__ import annotations

import os
from pathlib import Path

from .build_once import build_once
from .tiny_models import BOS, EOS, PAD, build_tokenizer

FAMILIES = ("qwen3_next", "qwen3_5", "qwen3_5_moe")
_BUILDER_VERSION = 1


def tiny_gdn_config(family: str, vocab_size: int, tok, **overrides):
    """The transformers config of a tiny model of `family` (a text config for the Qwen3.5 ones)."""
    from transformers import Qwen3_5MoeTextConfig, Qwen3_5TextConfig, Qwen3NextConfig

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25},
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
        tie_word_embeddings=False,
    )
    moe = dict(
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32
    )
    if family == "qwen3_next":
        kwargs.update(moe, intermediate_size=128, mlp_only_layers=[1])
    elif family == "qwen3_5_moe":
        kwargs.update(moe)
    else:
        kwargs.update(intermediate_size=128)
    kwargs.update(overrides)
    cls = {"qwen3_next": Qwen3NextConfig, "qwen3_5": Qwen3_5TextConfig, "qwen3_5_moe": Qwen3_5MoeTextConfig}
    return cls[family](**kwargs)


def tiny_gdn_model(family: str, cfg):
    """transformers' own causal LM of `family` with random weights (eager experts: fp64-safe)."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM

    cls = {
        "qwen3_next": Qwen3NextForCausalLM,
        "qwen3_5": Qwen3_5ForCausalLM,
        "qwen3_5_moe": Qwen3_5MoeForCausalLM,
    }
    model = cls[family](cfg)
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # norms (zero-centred and gated), A_log, dt_bias
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model.eval()


def build_tiny_gdn_checkpoint(
    path: str | os.PathLike, family: str = "qwen3_next", seed: int = 0, vocab_size: int = 512, **overrides
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny checkpoint at `path`."""
    import torch

    path = Path(path)
    stamp = {
        "v": _BUILDER_VERSION,
        "family": family,
        "seed": seed,
        "vocab_size": vocab_size,
        "overrides": {k: repr(v) for k, v in sorted(overrides.items())},
    }

    def build(folder: Path) -> None:
        tok = build_tokenizer(folder, vocab_size)
        cfg = tiny_gdn_config(family, vocab_size, tok, **overrides)
        torch.manual_seed(seed)
        tiny_gdn_model(family, cfg).save_pretrained(str(folder))

    return build_once(path, stamp, build)
