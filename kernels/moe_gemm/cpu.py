"""The MoE grouped GEMM on the CPU: one matmul per expert over its rows, in the inputs' dtype (rows
past offs[-1], routed to no expert, zeros)."""

from __future__ import annotations

import torch


def moe_gemm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    y = torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    start = 0
    for e, end in enumerate(offs.tolist()):
        y[start:end] = x[start:end] @ w[e].T
        start = end
    return y
