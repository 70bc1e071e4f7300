"""RMSNorm on the CPU: the plain torch form of transformers' KimiLinearRMSNorm (normalise in fp32,
cast back to the input dtype, then multiply by the weight), so CPU runs match transformers bit for
bit."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)
