"""Float64 reference of the MoE grouped GEMM."""

from __future__ import annotations

import torch

F64 = torch.float64


def moe_gemm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """y[r] = x[r] @ w[e]^T for the rows of expert e (offs: cumulative row ends), float64 throughout."""
    y = torch.zeros(x.shape[0], w.shape[1], dtype=F64)
    start = 0
    for e, end in enumerate(offs.tolist()):
        y[start:end] = x[start:end].to(F64).cpu() @ w[e].to(F64).cpu().T
        start = end
    return y
