"""Plain torch form of the gated RMSNorm (transformers' KimiLinearRMSNormGated, fp32 throughout)."""

from __future__ import annotations

import torch


def naive_gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    x = o.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return (weight.float() * x * torch.sigmoid(gate.float())).to(o.dtype)
