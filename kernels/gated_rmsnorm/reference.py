"""Float64 reference of the gated RMSNorm."""

from __future__ import annotations

import torch

F64 = torch.float64


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, times weight, times sigmoid(gate); float64 throughout."""
    x = o.to(F64)
    x = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return x * weight.to(F64) * torch.sigmoid(gate.to(F64))
