"""Where the fused elementwise kernels of the model layers run (`kernels.rms_norm`,
`kernels.swiglu`): each replaces several torch launches over [tokens x width] by one pass on the
GPU path. `KernelChoice.fused_elementwise` off keeps the plain torch forms there too (e.g. to time
one against the other); the CPU always runs the torch forms."""

from __future__ import annotations

import torch

from evalkit import kernels


def fused_elementwise(t: torch.Tensor, on: bool) -> bool:
    """True when a call on `t` takes the fused kernel: chosen (`on`) and on the GPU path (or under
    TRITON_INTERPRET=1)."""
    return on and kernels.use_triton(t)
