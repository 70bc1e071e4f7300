"""Host-side helpers shared by the Triton wrappers: interpreter detection and pool-dtype mapping."""

from __future__ import annotations

import os

import torch

from .common import KernelInputError, state_dtype_name


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_triton_device(kernel, t: torch.Tensor) -> None:
    """CPU tensors need the kernel to have been built by Triton's interpreter (TRITON_INTERPRET=1
    at first import); say so plainly instead of failing deep inside Triton."""
    if t.is_cuda:
        return
    if type(kernel).__name__ != "InterpretedFunction":
        raise KernelInputError(
            "Triton kernels got CPU tensors but were built for the GPU: set TRITON_INTERPRET=1 before "
            "the first kernel call, or use evalkit.kernels.cpu"
        )


def state_constexpr(pool: torch.Tensor) -> str:
    """The pool dtype as the kernels' STATE_DTYPE constexpr ('fp32' | 'fp16' | 'bf16')."""
    return state_dtype_name(pool.dtype)


def rounding_flag(rounding: str) -> bool:
    """'rtne' (the only production mode) -> False; 'rtz' (tests of the twin check) -> True."""
    if rounding not in ("rtne", "rtz"):
        raise KernelInputError(f"rounding must be 'rtne' or 'rtz', got {rounding!r}")
    return rounding == "rtz"
