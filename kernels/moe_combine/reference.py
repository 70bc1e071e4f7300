"""Float64 reference of the MoE combine."""

from __future__ import annotations

import torch

F64 = torch.float64


def moe_combine(ys: torch.Tensor, inv: torch.Tensor, w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """out[t] = sum_j w[t, j] ys[inv[t, j]], float64 throughout (`dtype` is ignored: compare in float64)."""
    n, k = inv.shape
    return (ys.to(F64)[inv.reshape(-1)].view(n, k, -1) * w.to(F64)[..., None]).sum(1)
