"""Triton building blocks shared by the KDA kernels: the fused gate, L2 normalisation, and the
state store that rounds to the pool dtype.

The pool dtype is a string constexpr ("fp32" | "fp16" | "bf16"), so the branches below are
resolved at compile time: the fp32 build stores the fp32 registers as they are and contains no
conversion at all. fp16 uses the hardware conversion with round-to-nearest-even. bf16 rounds with
integer arithmetic (the same ties-to-even algorithm as torch's `.to(torch.bfloat16)`): Triton's CPU
interpreter truncates fp32 -> bf16, so the bit form keeps one code path that is exact on the GPU
and in the interpreter alike. `ROUND_RTZ` exists only so tests can build a deliberately wrong
(truncating) kernel and watch the fp32-twin check catch it."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def kda_gate(g_raw, dt_bias, a_log):
    """g = -exp(A_log) * softplus(g_raw + dt_bias), softplus as where(x > 20, x, log(1 + exp(x)))."""
    x = g_raw + dt_bias
    sp = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
    return -tl.exp(a_log) * sp


@triton.jit
def l2norm_rows(x):
    """x / sqrt(sum x^2 + 1e-6) over the last axis of a 2-D tile."""
    return x / tl.sqrt(tl.sum(x * x, axis=1) + 1e-6)[:, None]


@triton.jit
def l2norm_vec(x):
    return x / tl.sqrt(tl.sum(x * x, axis=0) + 1e-6)


@triton.jit
def round_to_bf16_bits(x, ROUND_RTZ: tl.constexpr):
    """fp32 -> bf16 by bit arithmetic: ties-to-even (or truncation when ROUND_RTZ); NaN stays NaN."""
    bits = x.to(tl.uint32, bitcast=True)
    if not ROUND_RTZ:
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
    hi = (bits >> 16).to(tl.uint16)
    hi = tl.where(x != x, 0x7FC0, hi).to(tl.uint16)
    return hi.to(tl.bfloat16, bitcast=True)


@triton.jit
def round_state(S, STATE_DTYPE: tl.constexpr, ROUND_RTZ: tl.constexpr):
    """The fp32 tile S rounded to the pool dtype (a no-op for fp32)."""
    if STATE_DTYPE == "fp32":
        return S
    elif STATE_DTYPE == "fp16":
        if ROUND_RTZ:
            return S.to(tl.float16, fp_downcast_rounding="rtz")
        else:
            return S.to(tl.float16, fp_downcast_rounding="rtne")
    else:
        return round_to_bf16_bits(S, ROUND_RTZ)
