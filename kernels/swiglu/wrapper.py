"""Python entry of the Triton SwiGLU activation: checks and launch."""

from __future__ import annotations

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import as_rows, check_triton_device
from .kernel import swiglu_kernel

BR, BI = 8, 256  # [8 rows x 256 columns] per program


def swiglu(gu: torch.Tensor) -> torch.Tensor:
    """gu [..., 2 * inter] = [g | u]; returns silu(g) * u [..., inter] (contiguous, gu's dtype)."""
    if gu.shape[-1] % 2:
        raise KernelInputError(f"swiglu: the last dim holds [g | u], so it must be even, got {gu.shape[-1]}")
    check_triton_device(swiglu_kernel, gu)
    rows = as_rows(gu)
    inter = gu.shape[-1] // 2
    out = torch.empty(rows.shape[0], inter, dtype=gu.dtype, device=gu.device)
    if rows.shape[0] == 0 or inter == 0:
        return out.view(*gu.shape[:-1], inter)
    grid = (triton.cdiv(rows.shape[0], BR), triton.cdiv(inter, BI))
    swiglu_kernel[grid](rows, out, rows.shape[0], rows.stride(0), INTER=inter, BR=BR, BI=BI)
    return out.view(*gu.shape[:-1], inter)
