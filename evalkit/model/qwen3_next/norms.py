"""The two RMSNorms of the Qwen GDN family (gated-deltanet.md §4, §2.5).

- zero-centred: every decoder norm, the final norm and the attention q/k norms; the weight is an
  offset from 1 and multiplies in fp32 before the cast back;
- gated: the GDN output norm; a plain weight applied after the cast, times silu(z) in fp32."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def zero_centred_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + weight.to(torch.float32))).to(x.dtype)


def silu_gated_rms_norm(o: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = o.dtype
    h = o.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    h = weight * h.to(dtype)
    return (h * F.silu(z.to(torch.float32))).to(dtype)
