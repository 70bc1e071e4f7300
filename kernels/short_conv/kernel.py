"""Triton depthwise causal convolution (kernel W, optional bias, SiLU) over packed sequences, with
a conv-state pool.

Prefill: one program per (chunk of BT tokens of one sequence, block of BC channels). Tap j of
token t reads position p = t - (W-1) + j: from x when p is inside the sequence, otherwise from the
sequence's pool row (the last W-1 raw inputs before it) or zero for a new sequence. The program that
owns a sequence's first chunk is the only one reading its pool row, so it also writes the new row
(the last W-1 raw inputs of pool ++ x): no other program can race with it.
Decode: one program per (sequence, channel block): convolve [pool | x], shift the pool.

Layouts: x's rows may be strided (stride_x elements apart: the conv's channels are a column slice
of a wider projection); y is [C // GROUP, rows, GROUP], each group of GROUP channels a contiguous
[rows, GROUP] block (GROUP = C: the plain [rows, C]), so a layer that splits the channels into
equal parts (KDA's q | k | v) gets each part contiguous without a copy."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _out_offsets(row, ch, n_rows, GROUP: tl.constexpr):
    """Element offsets in y [C // GROUP, n_rows, GROUP] of (row, channel)."""
    return (ch // GROUP).to(tl.int64) * n_rows * GROUP + row * GROUP + ch % GROUP


@triton.jit(do_not_specialize=["T"])
def conv_prefill_kernel(
    x,
    weight,
    bias,
    conv_pool,
    slots,
    has_initial_state,
    y,
    chunk_start,
    chunk_end,
    chunk_seq,
    cu_seqlens,
    stride_x,
    T,
    C: tl.constexpr,
    W: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BW: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    GROUP: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_cb = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    i_n = tl.load(chunk_seq + i_c)
    bos = tl.load(cu_seqlens + i_n)
    eos = tl.load(cu_seqlens + i_n + 1)
    slot = tl.load(slots + i_n).to(tl.int64)
    # earliest readable position: W-1 pool columns before bos, or none for a new sequence (scalar
    # bools in masks trip the CPU interpreter, so this is an integer bound)
    lo = bos - tl.where(tl.load(has_initial_state + i_n) != 0, W - 1, 0)

    o_t = t0 + tl.arange(0, BT)
    o_c = i_cb * BC + tl.arange(0, BC)
    m_t = o_t < t1
    m_c = o_c < C
    p_pool = conv_pool + slot * C * (W - 1)
    acc = tl.zeros([BT, BC], dtype=tl.float32)
    for j in tl.static_range(W):
        pos = o_t - (W - 1) + j
        in_seq = m_t & (pos >= bos)
        xv = tl.load(
            x + pos.to(tl.int64)[:, None] * stride_x + o_c[None, :],
            mask=in_seq[:, None] & m_c[None, :],
            other=0.0,
        ).to(tl.float32)
        from_pool = m_t & (pos < bos) & (pos >= lo)
        col = pos - bos + (W - 1)  # pool column of a position before the sequence
        pv = tl.load(
            p_pool + o_c[None, :] * (W - 1) + col[:, None], mask=from_pool[:, None] & m_c[None, :], other=0.0
        ).to(tl.float32)
        w_j = tl.load(weight + o_c * W + j, mask=m_c, other=0.0).to(tl.float32)
        acc += (xv + pv) * w_j[None, :]
    if HAS_BIAS:
        acc += tl.load(bias + o_c, mask=m_c, other=0.0).to(tl.float32)[None, :]
    out = acc * tl.sigmoid(acc)
    tl.store(
        y + _out_offsets(o_t.to(tl.int64)[:, None], o_c[None, :], T, GROUP),
        out.to(y.dtype.element_ty),
        mask=m_t[:, None] & m_c[None, :],
    )

    if t0 == bos:  # the first chunk owns the pool row
        o_w = tl.arange(0, BW)
        m_w = o_w < (W - 1)
        pos_w = eos - (W - 1) + o_w  # positions of the new row's columns
        in_seq_w = m_w & (pos_w >= bos)
        xv_w = tl.load(
            x + pos_w.to(tl.int64)[None, :] * stride_x + o_c[:, None],
            mask=in_seq_w[None, :] & m_c[:, None],
            other=0.0,
        )
        from_pool_w = m_w & (pos_w < bos) & (pos_w >= lo)
        pv_w = tl.load(
            p_pool + o_c[:, None] * (W - 1) + (pos_w - bos + (W - 1))[None, :],
            mask=from_pool_w[None, :] & m_c[:, None],
            other=0.0,
        )
        new = tl.where(in_seq_w[None, :], xv_w.to(conv_pool.dtype.element_ty), pv_w)
        tl.store(p_pool + o_c[:, None] * (W - 1) + o_w[None, :], new, mask=m_w[None, :] & m_c[:, None])


@triton.jit(do_not_specialize=["B"])
def conv_decode_kernel(
    x,
    weight,
    bias,
    conv_pool,
    slots,
    y,
    stride_x,
    B,
    C: tl.constexpr,
    W: tl.constexpr,
    BC: tl.constexpr,
    BW: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    GROUP: tl.constexpr,
):
    i_b = tl.program_id(0).to(tl.int64)
    i_cb = tl.program_id(1)
    o_c = i_cb * BC + tl.arange(0, BC)
    o_w = tl.arange(0, BW)
    m_c = o_c < C
    m_w = o_w < (W - 1)
    slot = tl.load(slots + i_b).to(tl.int64)
    p_pool = conv_pool + slot * C * (W - 1) + o_c[:, None] * (W - 1) + o_w[None, :]
    m_p = m_c[:, None] & m_w[None, :]
    prev = tl.load(p_pool, mask=m_p, other=0.0)
    xv = tl.load(x + i_b * stride_x + o_c, mask=m_c, other=0.0)
    w_prev = tl.load(weight + o_c[:, None] * W + o_w[None, :], mask=m_p, other=0.0).to(tl.float32)
    w_last = tl.load(weight + o_c * W + (W - 1), mask=m_c, other=0.0).to(tl.float32)
    acc = tl.sum(prev.to(tl.float32) * w_prev, axis=1) + xv.to(tl.float32) * w_last
    if HAS_BIAS:
        acc += tl.load(bias + o_c, mask=m_c, other=0.0).to(tl.float32)
    tl.store(y + _out_offsets(i_b, o_c, B, GROUP), (acc * tl.sigmoid(acc)).to(y.dtype.element_ty), mask=m_c)
    # shift: column m <- column m+1, last column <- x
    nxt = tl.load(p_pool + 1, mask=m_c[:, None] & (o_w < W - 2)[None, :], other=0.0)
    new = tl.where((o_w == W - 2)[None, :], xv.to(conv_pool.dtype.element_ty)[:, None], nxt)
    tl.debug_barrier()
    tl.store(p_pool, new, mask=m_p)
