"""Plain torch form of the MoE combine, as `evalkit.model.layers.moe` wrote it before the op: the
expert outputs put back in token order, widened to fp32, weighted and summed over the top-k."""

from __future__ import annotations

import torch


def naive_moe_combine(
    ys: torch.Tensor, inv: torch.Tensor, w: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    n, k = inv.shape
    y = ys[inv.reshape(-1)].view(n, k, -1)
    return (y.to(torch.float32) * w[..., None]).sum(1).to(dtype)
