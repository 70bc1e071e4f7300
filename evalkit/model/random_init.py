"""Random weights for a Kimi-Linear architecture, made directly on the target device (benchmarks at
real size need no checkpoint on disk). Values follow transformers' init (normal(0, std) matrices,
unit norms, FLA's A_log / dt_bias init), so activations and routing look like a real model's."""

from __future__ import annotations

import math

import torch

from .config import KimiArch
from .kimi import KimiLinearLM

_MLA_LAYERS_48B = (4, 8, 12, 16, 20, 24, 27)  # 1-indexed, as the checkpoint's linear_attn_config lists them


def kimi_linear_48b_config(num_layers: int = 27) -> dict:
    """config.json of Kimi-Linear-48B-A3B (as released on the hub), optionally cut to
    its first `num_layers` layers: the MLA layers stay where they are (4, 8, ..., 24, and 27 only when
    all 27 are kept); a cut with no MLA layer keeps its last layer as MLA so the hybrid path runs."""
    full = [i for i in _MLA_LAYERS_48B if i <= num_layers and (i != 27 or num_layers == 27)] or [num_layers]
    return {
        "model_type": "kimi_linear",
        "architectures": ["KimiLinearForCausalLM"],
        "vocab_size": 163840,
        "hidden_size": 2304,
        "num_hidden_layers": num_layers,
        "intermediate_size": 9216,
        "moe_intermediate_size": 1024,
        "num_experts": 256,
        "num_experts_per_token": 8,
        "num_shared_experts": 1,
        "moe_renormalize": True,
        "routed_scaling_factor": 2.446,
        "num_expert_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "rms_norm_eps": 1e-5,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "q_lora_rank": None,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "model_max_length": 1048576,
        "tie_word_embeddings": False,
        "bos_token_id": 163584,
        "eos_token_id": 163586,
        "pad_token_id": 163839,
        "linear_attn_config": {
            "full_attn_layers": full,
            "kda_layers": [i for i in range(1, num_layers + 1) if i not in full],
            "num_heads": 32,
            "head_dim": 128,
            "short_conv_kernel_size": 4,
        },
    }


@torch.no_grad()
def random_model(
    arch: KimiArch, device: str | torch.device, dtype: torch.dtype, seed: int = 0, std: float = 0.02
) -> KimiLinearLM:
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    lm = KimiLinearLM(arch, dtype, dev)
    for name, p in lm.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("input_layernorm", "post_attention_layernorm", "norm", "o_norm", "kv_a_layernorm"):
            p.fill_(1.0)
        elif leaf == "A_log":
            p.copy_(
                torch.empty(p.shape, device=dev).uniform_(1.0, 16.0, generator=gen).log().to(dtype).float()
            )
        elif leaf == "dt_bias":
            dt = (
                torch.empty(p.shape, device=dev).uniform_(math.log(1e-3), math.log(1e-1), generator=gen).exp()
            )
            dt = dt.clamp_min(1e-4)
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif leaf == "e_bias":
            p.normal_(0.0, 0.01, generator=gen)
        else:
            p.normal_(0.0, std, generator=gen)
    return lm.eval()
