"""Triton grouped GEMM for the MoE experts of a decode step: y[r] = x[r] @ w[e]^T for the rows r
that were routed to expert e (rows sorted by expert, `offs` their cumulative ends per expert).

A decode step routes a few rows to each expert (512 sequences x top 8 over 256 experts: ~16), so
the GEMM is the experts' weights streamed once: bandwidth, not arithmetic. One program per
(expert, block of BN output columns) walks the expert's rows in blocks of BM, reading its weight
block once per row block (an expert with more rows than BM reads it again, which the H100 served
at DRAM speed: the tile's BM is sized to hold a step's rows), and a program whose expert got no
rows returns without reading anything. A row's sum runs over K in BK steps in
the same order whatever the other rows are, so its result does not depend on the batch."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import round_to


@triton.jit
def moe_gemm_kernel(
    x,
    w,
    y,
    offs,
    R,
    N: tl.constexpr,
    K: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """WIDEN (set only under Triton's CPU interpreter, whose dot multiplies 16-bit tiles as raw
    integers: numpy has no bf16) widens the operands to fp32 first, exact for 16-bit values like the
    tensor cores' products. fp32 operands are multiplied as IEEE fp32 (a CPU model's weights, or
    `weights=fp32` on the GPU), as exact as torch's fp32 matmul."""
    i_n = tl.program_id(0)
    e = tl.program_id(1)
    E = tl.num_programs(1) - 1  # the last program row is the virtual expert of the rows past offs
    end = tl.load(offs + tl.minimum(e, E - 1)).to(tl.int64)
    start = tl.load(offs + e - 1, mask=e > 0, other=0).to(tl.int64)
    o_n = i_n * BN + tl.arange(0, BN)
    m_n = o_n < N
    if e == E:  # its rows run from offs[E-1] to R; the loop below has none (start == end)
        for m0 in range(start, R, BM):
            o_m = m0 + tl.arange(0, BM)
            zero = tl.zeros([BM, BN], dtype=y.dtype.element_ty)
            tl.store(y + o_m[:, None] * N + o_n[None, :], zero, mask=(o_m < R)[:, None] & m_n[None, :])
    w_e = w + e.to(tl.int64) * N * K
    for m0 in range(start, end, BM):
        o_m = m0 + tl.arange(0, BM)
        m_m = o_m < end
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k0 in range(0, K, BK):
            o_k = k0 + tl.arange(0, BK)
            p_a = x + o_m[:, None] * K + o_k[None, :]
            p_b = w_e + o_n[None, :] * K + o_k[:, None]
            if K % BK == 0 and N % BN == 0:  # the model's dims: the weights unmasked, rows masked
                a = tl.load(p_a, mask=m_m[:, None], other=0.0)
                b = tl.load(p_b)
            else:
                m_k = o_k < K
                a = tl.load(p_a, mask=m_m[:, None] & m_k[None, :], other=0.0)
                b = tl.load(p_b, mask=m_k[:, None] & m_n[None, :], other=0.0)
            if WIDEN or a.dtype == tl.float32:
                acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
        tl.store(
            y + o_m[:, None] * N + o_n[None, :],
            round_to(acc, y.dtype.element_ty),
            mask=m_m[:, None] & m_n[None, :],
        )
