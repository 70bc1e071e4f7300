"""The one switch for the fused elementwise kernels of the model layers (`kernels.rms_norm`,
`kernels.swiglu`): each replaces several torch launches over [tokens x width] by one pass on the
GPU path. EVALKIT_FUSED_ELEMENTWISE=0 (or FUSED = False) keeps the plain torch forms there too, e.g.
to time one against the other; the CPU always runs the torch forms."""

from __future__ import annotations

import os

import torch

from evalkit import kernels
from evalkit.errors import InputError

FUSED_ENV = "EVALKIT_FUSED_ELEMENTWISE"


FUSED: bool | None = None  # None: read FUSED_ENV at each call


def fused_elementwise(t: torch.Tensor) -> bool:
    """True when a call on `t` takes the fused kernel (GPU path, or under TRITON_INTERPRET=1)."""
    on = FUSED
    if on is None:
        value = os.environ.get(FUSED_ENV, "1")
        if value not in ("0", "1"):
            raise InputError(
                f"{FUSED_ENV}={value!r}: expected 1 (fused kernels on the GPU) or 0 (torch forms)"
            )
        on = value == "1"
    return on and kernels.use_triton(t)
