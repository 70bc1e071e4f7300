"""The MoE combine on the CPU, float32 torch: the top-k summed one by one in their order, as the
Triton kernel sums them."""

from __future__ import annotations

import torch

F32 = torch.float32


def moe_combine(ys: torch.Tensor, inv: torch.Tensor, w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros(inv.shape[0], ys.shape[-1], dtype=F32, device=ys.device)
    for j in range(inv.shape[1]):
        out += ys[inv[:, j]].to(F32) * w[:, j : j + 1].to(F32)
    return out.to(dtype)
