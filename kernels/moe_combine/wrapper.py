"""Python entry of the Triton MoE combine: checks and launch."""

from __future__ import annotations

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import check_triton_device
from .kernel import moe_combine_kernel

BR, BD = 16, 256  # a [16 tokens x 256 hidden] fp32 tile per program: 16 KiB of accumulators


def moe_combine(ys: torch.Tensor, inv: torch.Tensor, w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """ys [n*k, D] expert rows (any order), inv [n, k] int row of each token's j-th expert, w [n, k]
    its weight; returns [n, D] in `dtype`."""
    if inv.dim() != 2 or w.shape != inv.shape:
        raise KernelInputError(f"inv and w must be [n, k] alike, got {tuple(inv.shape)} and {tuple(w.shape)}")
    if ys.dim() != 2:
        raise KernelInputError(f"ys must be [rows, D], got {tuple(ys.shape)}")
    check_triton_device(moe_combine_kernel, ys)
    n, k = inv.shape
    D = ys.shape[1]
    out = torch.empty(n, D, dtype=dtype, device=ys.device)
    if n == 0:
        return out
    grid = (triton.cdiv(n, BR), triton.cdiv(D, BD))
    moe_combine_kernel[grid](
        ys.contiguous(), inv.contiguous(), w.to(torch.float32).contiguous(), out, n, D=D, TOPK=k, BR=BR, BD=BD
    )
    return out
