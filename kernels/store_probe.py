"""Flat Triton kernels around `triton_common.store_state` / `load_state`: store any fp32 values
the format's way and widen them back, so tests (interpreter) and GPU checks can compare the
kernels' format arithmetic with `rounding.round_to_format` on every bit pattern.

Store and load are two launches, as in the engine (a state is stored by one step and loaded by the
next): within one program a load may run in another thread than the store of the same address,
and on the GPU nothing orders the two."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .formats import StateFormat, parse_format
from .triton_common import load_state, store_state
from .triton_launch import format_constexprs, launch_key, pool_arg


@triton.jit(do_not_specialize=["key"])
def store_probe_kernel(
    x, out, back, pos, key, n,
    STORAGE: tl.constexpr, MANT_BITS: tl.constexpr, ROUNDING: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    stored = store_state(tl.load(x + o, mask=m), o, tl.load(pos), key, STORAGE, MANT_BITS, ROUNDING)
    tl.store(out + o, stored, mask=m)


@triton.jit
def load_probe_kernel(out, back, n, STORAGE: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(back + o, load_state(out + o, m, STORAGE), mask=m)


def store_and_load(
    x: torch.Tensor, fmt: StateFormat | str, *, sr_seed: int = 0, position: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x stored in fmt.pool_dtype, that widened back to fp32) by the kernels' code; x is a flat
    fp32 tensor whose index is the element index of the store (as in a [1, 1, n] state)."""
    fmt = parse_format(fmt)
    out = torch.empty(x.numel(), dtype=fmt.pool_dtype, device=x.device)
    back = torch.empty(x.numel(), dtype=torch.float32, device=x.device)
    pos = torch.tensor([position], dtype=torch.int64, device=x.device)
    grid = (triton.cdiv(x.numel(), 512),)
    store_probe_kernel[grid](
        x.contiguous(), pool_arg(out), back, pos, launch_key(fmt, sr_seed), x.numel(),
        **format_constexprs(fmt), BLOCK=512,
    )  # fmt: skip
    load_probe_kernel[grid](
        pool_arg(out), back, x.numel(), STORAGE=format_constexprs(fmt)["STORAGE"], BLOCK=512
    )
    return out, back
