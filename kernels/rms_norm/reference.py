"""Float64 reference of the RMSNorm."""

from __future__ import annotations

import torch

F64 = torch.float64


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight, float64 throughout (no rounding to the input dtype)."""
    h = x.to(F64)
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.to(F64)
