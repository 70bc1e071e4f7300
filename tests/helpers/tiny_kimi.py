"""The smallest Kimi-Linear the layer tests build: two layers (KDA, then MLA with an MoE), hidden 32,
four experts of width 16, top 2; random weights in float32 on the CPU."""

from __future__ import annotations

import torch

TINY_KIMI = {
    "model_type": "kimi_linear", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
    "intermediate_size": 64, "moe_intermediate_size": 16, "num_experts": 4, "num_experts_per_token": 2,
    "num_attention_heads": 2, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
    "v_head_dim": 8, "linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1],
                                            "num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4},
}  # fmt: skip


def tiny_moe_layer():
    """The tiny model's MoE layer (its weights drawn with seed 0, std 0.2)."""
    from evalkit.model import parse_config, random_model
    from evalkit.model.layers.moe import MoE

    lm = random_model(parse_config(TINY_KIMI), "cpu", torch.float32, seed=0, std=0.2)
    return next(m for m in lm.modules() if isinstance(m, MoE))
