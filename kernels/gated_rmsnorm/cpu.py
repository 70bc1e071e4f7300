"""The gated RMSNorm on the CPU, float32 torch."""

from __future__ import annotations

import torch

F32 = torch.float32


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    x = o.to(F32)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return (x * weight.to(F32) * torch.sigmoid(gate.to(F32))).to(o.dtype)
