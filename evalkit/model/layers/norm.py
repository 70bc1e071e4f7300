"""RMSNorm as transformers' KimiLinearRMSNorm: normalise in fp32, cast back, then weight.

On the GPU path one Triton pass (`evalkit.kernels.rms_norm`: the same roundings, a sum of squares
in its own fixed order, so the last bit can differ from torch's); the plain torch form on the CPU
(bit for bit transformers') or with `KernelChoice.fused_elementwise` off (`fused.py`)."""

from __future__ import annotations

import torch

from evalkit import kernels

from .fused import fused_elementwise


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, fused: bool = True) -> torch.Tensor:
    """`fused`: the run's `KernelChoice.fused_elementwise`."""
    if fused_elementwise(x, fused):
        return kernels.rms_norm(x, weight, eps)
    return kernels.cpu.rms_norm(x, weight, eps)
