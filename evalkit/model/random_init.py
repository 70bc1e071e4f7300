"""Random weights for a Kimi-Linear architecture, made directly on the target device (benchmarks at
real size need no checkpoint on disk). Values follow transformers' init (normal(0, std) matrices,
unit norms, FLA's A_log / dt_bias init), so activations and routing look like a real model's."""

from __future__ import annotations

import math

import torch

from .config import KimiArch
from .kimi import KimiLinearLM


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
