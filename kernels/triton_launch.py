"""Host-side helpers shared by the Triton wrappers: interpreter detection and pool-dtype mapping."""

from __future__ import annotations

import os

import torch

from .common import KernelInputError, state_dtype_name


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_triton_device(kernel, t: torch.Tensor) -> None:
    """CPU tensors need Triton's interpreter, which only works when TRITON_INTERPRET=1 was set before
    `triton` was first imported (the standard library's own jit functions are built at that import).
    Say so plainly instead of failing deep inside Triton."""
    if t.is_cuda:
        return
    import triton.language as tl

    if type(kernel).__name__ != "InterpretedFunction" or type(tl.sum).__name__ != "InterpretedFunction":
        raise KernelInputError(
            "Triton kernels got CPU tensors, but Triton was imported for the GPU: set TRITON_INTERPRET=1 in "
            "the environment before anything imports triton, or use evalkit.kernels.cpu"
        )


def state_constexpr(pool: torch.Tensor) -> str:
    """The pool dtype as the kernels' STATE_DTYPE constexpr ('fp32' | 'fp16' | 'bf16')."""
    return state_dtype_name(pool.dtype)


def rounding_flag(rounding: str) -> bool:
    """'rtne' (the only production mode) -> False; 'rtz' (tests of the twin check) -> True."""
    if rounding not in ("rtne", "rtz"):
        raise KernelInputError(f"rounding must be 'rtne' or 'rtz', got {rounding!r}")
    return rounding == "rtz"
