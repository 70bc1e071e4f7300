"""Triton SwiGLU activation: out = silu(g) * u for gu = [g | u] (the fused gate/up projection's
output), one read of gu and one write, where torch reads and writes [rows x inter] four times (silu,
then the product; both halves are strided views). Roundings as the torch form: silu in fp32 from
the input value, with IEEE division and libdevice's expf as torch's CUDA kernel (so the same fp32
value), rounded to the input dtype; then the product in fp32, rounded again. Elementwise: a row's
output never depends on the other rows."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import exp_as_torch, round_to


@triton.jit
def swiglu_kernel(gu, out, n_rows, stride_gu, INTER: tl.constexpr, BR: tl.constexpr, BI: tl.constexpr):
    o_r = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)
    o_i = tl.program_id(1) * BI + tl.arange(0, BI)
    m = (o_r < n_rows)[:, None] & (o_i < INTER)[None, :]
    p = gu + o_r[:, None] * stride_gu + o_i[None, :]
    g = tl.load(p, mask=m, other=0.0).to(tl.float32)
    u = tl.load(p + INTER, mask=m, other=0.0).to(tl.float32)
    s = round_to(tl.math.div_rn(g, 1.0 + exp_as_torch(-g)), out.dtype.element_ty).to(tl.float32)
    tl.store(out + o_r[:, None] * INTER + o_i[None, :], round_to(s * u, out.dtype.element_ty), mask=m)
