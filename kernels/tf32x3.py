"""fp32 products on tensor cores at about fp32 accuracy ("3xTF32"), built as Triton builds
`tl.dot(a, b, acc, input_precision="tf32x3")` but with a cheaper split.

Triton (3.6 to 3.9, its F32DotTC pass) writes a = a_hi + a_lo with a_hi = cvt.rna.tf32.f32(a) and
a_lo = a - a_hi (likewise b), then d = dot(a_lo, b_hi) + dot(a_hi, b_lo) in tf32, NaN entries of d
set to 0 (so an infinite operand gives inf, not inf - inf), d = dot(a_hi, b_hi, d), and acc + d.
sm_90 has no instruction for cvt.rna.tf32: ptxas emulates it in four (a finite check, an add, a
mask, a select) for every element of both operands, and in the fp32 prefill scan every program
splits the chunk's whole W and K rows, so these conversions were half of its instructions (Nsight
Compute, results/bench/prefill-ncu/). Here the rounding is the add and the mask alone: the same
value for every finite input, so the same products in the same order give the same bits. For an
infinite or NaN operand the result is NaN, where Triton's build can give inf.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tf32_rna(x):
    """x (fp32) rounded to tf32 (10 mantissa bits) to nearest, ties away from zero: half a tf32 ulp
    added to the magnitude bits (a carry may reach the exponent), the 13 low bits cleared. Equal
    to cvt.rna.tf32.f32 for finite x."""
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def dot_tf32x3(a, b, acc):
    """a @ b (+ acc, when not None) as `tl.dot(a, b, acc, input_precision="tf32x3")`: the same three
    tf32 products in the same order, the same NaN guard, acc added last (without acc a zero one, as
    tl.dot's: the add turns a -0.0 result into +0.0 there too)."""
    a = a.to(tl.float32)
    a_hi = tf32_rna(a)
    return dot_tf32x3_split(a_hi, a - a_hi, b, acc)


@triton.jit
def dot_tf32x3_split(a_hi, a_lo, b, acc):
    """`dot_tf32x3(a, b, acc)` with a given as its halves a_hi = tf32_rna(a), a_lo = a - a_hi,
    split once where a is made (the prefill scan's Kd with "presplit": every program of a head
    multiplies the same rows). Loaded halves can feed the tensor cores from shared memory without
    passing through registers; on an H100 that changed the last bits of the products of Kd^T
    against splitting a transposed register tile (results/bench/prefill-presplit/)."""
    b = b.to(tl.float32)
    b_hi = tf32_rna(b)
    d = tl.dot(a_lo, b_hi, input_precision="tf32")
    d = tl.dot(a_hi, b - b_hi, d, input_precision="tf32")
    d = tl.where(d != d, 0.0, d)
    d = tl.dot(a_hi, b_hi, d, input_precision="tf32")
    if acc is None:
        out = d + tl.zeros(d.shape, tl.float32)
    else:
        out = d + acc
    return out
