"""Python entry of the Triton gated RMSNorm."""

from __future__ import annotations

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import check_triton_device
from .kernel import gated_rmsnorm_kernel


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    if gate.shape != o.shape:
        raise KernelInputError(f"gate shape {tuple(gate.shape)} != o shape {tuple(o.shape)}")
    V = o.shape[-1]
    if weight.numel() != V:
        raise KernelInputError(f"weight has {weight.numel()} elements, expected V = {V}")
    check_triton_device(gated_rmsnorm_kernel, o)
    o, gate = o.contiguous(), gate.contiguous()
    y = torch.empty_like(o)
    n_rows = o.numel() // V
    if n_rows == 0:
        return y
    BV = triton.next_power_of_2(V)
    BR = max(1, min(16, 4096 // BV))
    gated_rmsnorm_kernel[(triton.cdiv(n_rows, BR),)](
        o, gate, weight.contiguous(), y, n_rows, float(eps), V=V, BR=BR, BV=BV
    )
    return y
