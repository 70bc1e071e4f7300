"""Triton MoE combine: out[t] = sum_j w[t, j] * ys[inv[t, j]] in fp32, stored in the model dtype.

The grouped expert GEMM leaves its rows sorted by expert (`ys`); `inv[t, j]` is where token t's
j-th expert row landed. Putting the rows back in token order, widening them to fp32, weighting and
summing were four passes over [tokens x top-k x hidden] in torch (a scatter, a cast, a multiply, a
reduction); this is one gather and one write of [tokens x hidden]. The top-k are added one by one
in their order (the router's, sorted by score), so a token's sum never depends on other tokens."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def moe_combine_kernel(
    ys, inv, w, out, n_rows, D: tl.constexpr, TOPK: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr
):
    i_r = tl.program_id(0)
    i_d = tl.program_id(1)
    o_r = (i_r * BR + tl.arange(0, BR)).to(tl.int64)
    o_d = i_d * BD + tl.arange(0, BD)
    m_r = o_r < n_rows
    m = m_r[:, None] & (o_d < D)[None, :]
    acc = tl.zeros([BR, BD], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        src = tl.load(inv + o_r * TOPK + j, mask=m_r, other=0).to(tl.int64)
        wj = tl.load(w + o_r * TOPK + j, mask=m_r, other=0.0).to(tl.float32)
        y = tl.load(ys + src[:, None] * D + o_d[None, :], mask=m, other=0.0).to(tl.float32)
        acc += y * wj[:, None]
    tl.store(out + o_r[:, None] * D + o_d[None, :], acc.to(out.dtype.element_ty), mask=m)
