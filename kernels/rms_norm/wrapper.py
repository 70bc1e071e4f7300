"""Python entry of the Triton RMSNorm: checks and launch."""

from __future__ import annotations

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import as_rows, check_triton_device
from .kernel import rms_norm_kernel


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D] (rows may be strided, the last dim contiguous), weight [D]; returns a contiguous
    [..., D] in the dtype torch's `weight * h.to(x.dtype)` gives."""
    D = x.shape[-1]
    if weight.dim() != 1 or weight.numel() != D:
        raise KernelInputError(f"rms_norm: weight must be [{D}], got {tuple(weight.shape)}")
    check_triton_device(rms_norm_kernel, x)
    rows = as_rows(x)
    y = torch.empty(rows.shape, dtype=torch.promote_types(weight.dtype, x.dtype), device=x.device)
    if rows.shape[0] == 0:
        return y.view(x.shape)
    BD = triton.next_power_of_2(D)
    BR = max(1, min(16, 4096 // BD))
    n = rows.shape[0]
    rms_norm_kernel[(triton.cdiv(n, BR),)](
        rows, weight.contiguous(), y, n, rows.stride(0), float(eps), D=D, BR=BR, BD=BD,
        num_warps=max(1, min(8, BR * BD // 512)),
    )  # fmt: skip
    return y.view(x.shape)
