"""Random weights at real Qwen3-Next / Qwen3.5 sizes, made directly on the target device (benchmarks
need no checkpoint). Values follow transformers' init (gated-deltanet.md §1): normal(0, std)
matrices, zero-centred norms at 0, the GDN output norm at 1, A_log = log U(0.01, 16) and dt_bias
per value head (broadcast over K like every GDN gate input)."""

from __future__ import annotations

import math

import torch

from .config import GDNArch
from .gdn import per_channel
from .model import Qwen3NextLM

_COMMON = {
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "max_position_embeddings": 262144,
    "full_attention_interval": 4,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
}

# the text configs of released checkpoints (dims from their model cards / configs)
REAL_CONFIGS: dict[str, dict] = {
    "qwen3-next-80b-a3b": {
        **_COMMON,
        "model_type": "qwen3_next",
        "vocab_size": 151936,
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "linear_num_value_heads": 32,
        "intermediate_size": 5120,
        "num_experts": 512,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "norm_topk_prob": True,
    },
    "qwen3.5-35b-a3b": {
        **_COMMON,
        "model_type": "qwen3_5_moe_text",
        "vocab_size": 248320,
        "hidden_size": 2048,
        "num_hidden_layers": 40,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "linear_num_value_heads": 32,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
    },
    "qwen3.5-27b": {
        **_COMMON,
        "model_type": "qwen3_5_text",
        "vocab_size": 248320,
        "hidden_size": 5120,
        "num_hidden_layers": 64,
        "num_attention_heads": 24,
        "num_key_value_heads": 4,
        "linear_num_value_heads": 48,
        "intermediate_size": 17408,
    },
}


def real_gdn_config(name: str, num_layers: int | None = None) -> dict:
    """config.json of a released GDN model (`REAL_CONFIGS`), optionally cut to its first layers
    (rounded up to whole blocks of 3 GDN + 1 attention layers, so the hybrid path runs)."""
    if name not in REAL_CONFIGS:
        raise KeyError(f"unknown GDN config {name!r}; known: {sorted(REAL_CONFIGS)}")
    raw = dict(REAL_CONFIGS[name])
    if num_layers:
        raw["num_hidden_layers"] = min(raw["num_hidden_layers"], 4 * math.ceil(num_layers / 4))
    return raw


@torch.no_grad()
def random_gdn_model(
    arch: GDNArch, device: str | torch.device, dtype: torch.dtype, seed: int = 0, std: float = 0.02
) -> Qwen3NextLM:
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    lm = Qwen3NextLM(arch, dtype, dev)
    for name, p in lm.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("input_layernorm", "post_attention_layernorm", "q_norm", "k_norm") or name == "norm":
            p.zero_()  # zero-centred: scale 1
        elif leaf == "norm":
            p.fill_(1.0)  # the GDN output norm is a plain weight
        elif leaf == "A_log":
            a = torch.empty(p.shape, device=dev).uniform_(0.01, 16.0, generator=gen).log()
            p.copy_(a.to(dtype).float())
        elif leaf == "dt_bias":
            H = p.numel() // arch.linear_key_head_dim
            per_head = torch.ones(H, device=dev, dtype=dtype)
            p.copy_(per_channel(per_head[None], arch.linear_key_head_dim).reshape(-1))
        else:
            p.normal_(0.0, std, generator=gen)
    return lm.eval()
