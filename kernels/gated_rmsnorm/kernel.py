"""Triton gated RMSNorm: per row of V values, fp32 x * rsqrt(mean(x^2) + eps) * weight * sigmoid(gate)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def gated_rmsnorm_kernel(
    o, gate, weight, y, n_rows, eps, V: tl.constexpr, BR: tl.constexpr, BV: tl.constexpr
):
    i_r = tl.program_id(0)
    o_r = (i_r * BR + tl.arange(0, BR)).to(tl.int64)
    o_v = tl.arange(0, BV)
    m = (o_r < n_rows)[:, None] & (o_v < V)[None, :]
    idx = o_r[:, None] * V + o_v[None, :]
    x = tl.load(o + idx, mask=m, other=0.0).to(tl.float32)
    g = tl.load(gate + idx, mask=m, other=0.0).to(tl.float32)
    w = tl.load(weight + o_v, mask=o_v < V, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=1) / V + eps)
    out = x * r[:, None] * w[None, :] * tl.sigmoid(g)
    tl.store(y + idx, out.to(y.dtype.element_ty), mask=m)
