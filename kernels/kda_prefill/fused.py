"""The chunk-local part of the prefill (split path's `intra_kernel` + `solve_wy_kernel`) in one launch.

Why: the split path writes the fp32 Akk to HBM and reads it back row by row in the solve, and each
of its programs works on one 16-row block; at T=32k the two launches took ~15 ms, 11-23x their
memory floor. Here one program per (chunk, head) does, with the math of `intra_kernel`:

  1. the four diagonal 16x16 blocks of Aqk and Akk at once, with the exact exp(G_i - G_j), as
     [4, 16, 16, BKD] broadcasts over column blocks of K (no loop over columns: throughput, not a
     chain of reductions); Akk rows times beta_i;
  2. their inverses T_II = (I + A_II)^-1, forward substitution on rows, all four blocks per step;
  3. per 16-row block I in order: the off-diagonal columns j < 16I through the block's first row r,
     exp(G_i - G_r) * exp(G_r - G_j) (both <= 1: no overflow for any gate), [16, BKC] x [BKC, 64]
     tensor-core dots; then the rows of W = (I + Akk)^-1 (beta k e^G) by block forward
     substitution, W_I = T_II (X_I - A_I,<I W_<I), the earlier blocks' W rows read back from the
     output buffer ([64, BKC] tiles, rows < 16I; a barrier orders the stores and the reads, the
     data stays in L1/L2). Same for U with beta v.

Akk never leaves the program. The result equals the split path's to fp32 rounding: the same
products and safeguards, summed in another order (column blocks of K; the solve as substitution on
W instead of forming T and then T X)."""

from __future__ import annotations

import triton
import triton.language as tl

from .tiles import load_tile, store_tile

NB = tl.constexpr(4)  # 16-row blocks per chunk


@triton.jit
def _load_4d(base, rows, t1, H, i_h, D: tl.constexpr, c0, BD: tl.constexpr):
    """x[rows, c0:c0+BD] for a broadcastable int tensor of rows [a, b, c, 1] (0 past t1)."""
    o_d = c0 + tl.arange(0, BD)[None, None, None, :]
    ptr = base + (rows.to(tl.int64) * H + i_h) * D + o_d
    return tl.load(ptr, mask=(rows < t1) & (o_d < D), other=0.0).to(tl.float32)


@triton.jit
def _pick(x, idx, I: tl.constexpr):
    """x[I] of a tensor whose first axis is indexed by `idx` (an arange, broadcast to x's rank)."""
    return tl.sum(tl.where(idx == I, x, 0.0), axis=0)


@triton.jit
def _block_row(
    q,
    k,
    v,
    G,
    Aqk,
    W,
    U,
    t0,
    t1,
    scale,
    i_h,
    b_nq4,
    b_nk4,
    b_nk_all,
    b_beta4,
    b_t4,
    H: tl.constexpr,
    I: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BKC: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    """Rows 16I..16I+15 of the chunk: Aqk's off-diagonal columns stored, W and U solved and stored.
    `b_nq4`, `b_nk4`, `b_beta4`: the chunk's row norms and beta [NB, BC]; `b_nk_all`: the k norms as
    [BT]; `b_t4`: the T_JJ [NB, BC, BC]. Dots run over column blocks of BKC (full [64, 128] fp32
    operands spill at K = 128)."""
    o_b = tl.arange(0, NB)
    b_nq = _pick(b_nq4, o_b[:, None], I)
    b_nk = _pick(b_nk4, o_b[:, None], I)
    b_beta = _pick(b_beta4, o_b[:, None], I)
    b_t = _pick(b_t4, o_b[:, None, None], I)
    r0 = t0 + I * BC  # first row of the block: the reference row
    o_i = tl.arange(0, BC)
    o_j = tl.arange(0, BT)
    m_i = (r0 + o_i) < t1

    # off-diagonal columns j < r0 (none in block 0); differences outside their range masked to 0
    b_aqk = tl.zeros([BC, BT], dtype=tl.float32)
    b_aoff = tl.zeros([BC, BT], dtype=tl.float32)
    if I > 0:
        m_off = (o_j < I * BC)[:, None]
        for c0 in range(0, BK, BKC):
            o_k = c0 + tl.arange(0, BKC)
            b_gr = tl.load(G + (r0.to(tl.int64) * H + i_h) * K + o_k, mask=o_k < K, other=0.0)
            b_kc = load_tile(k, t0, t1, H, i_h, K, c0, BT, BKC) / b_nk_all[:, None]
            b_gc = load_tile(G, t0, t1, H, i_h, K, c0, BT, BKC)
            b_kcol = tl.where(m_off, b_kc * tl.exp(tl.where(m_off, b_gr[None, :] - b_gc, 0.0)), 0.0)
            b_g = load_tile(G, r0, t1, H, i_h, K, c0, BC, BKC)
            b_ei = tl.exp(tl.where(m_i[:, None], b_g - b_gr[None, :], 0.0))
            b_q = load_tile(q, r0, t1, H, i_h, K, c0, BC, BKC) / b_nq[:, None] * scale
            b_k = load_tile(k, r0, t1, H, i_h, K, c0, BC, BKC) / b_nk[:, None]
            b_aqk = tl.dot(b_q * b_ei, tl.trans(b_kcol), b_aqk, input_precision=DOT_PREC)
            b_aoff = tl.dot(b_k * b_ei, tl.trans(b_kcol), b_aoff, input_precision=DOT_PREC)
        b_aoff = b_aoff * b_beta[:, None]
    # every column but the diagonal block's (stored by the kernel): zeros right of it
    o_r = r0 + o_i
    m_col = (o_j < I * BC) | (o_j >= I * BC + BC)
    p_a = Aqk + (o_r.to(tl.int64)[:, None] * H + i_h) * BT + o_j[None, :]
    tl.store(p_a, b_aqk, mask=m_i[:, None] & m_col[None, :])

    # W_I = T_II (beta k e^G - A_I,<I W_<I), U_I = T_II (beta v - A_I,<I U_<I); the earlier blocks'
    # rows (< r0) come back from W and U (rows >= r0 masked to 0: A_I,>=I is 0 there anyway)
    for c0 in range(0, BK, BKC):
        b_x = load_tile(k, r0, t1, H, i_h, K, c0, BC, BKC) / b_nk[:, None]
        b_x = b_x * tl.exp(load_tile(G, r0, t1, H, i_h, K, c0, BC, BKC)) * b_beta[:, None]
        if I > 0:
            b_x -= tl.dot(b_aoff, load_tile(W, t0, r0, H, i_h, K, c0, BT, BKC), input_precision=DOT_PREC)
        store_tile(W, tl.dot(b_t, b_x, input_precision=DOT_PREC), r0, t1, H, i_h, K, c0, BC, BKC)
    for c0 in range(0, BV, BKC):
        b_y = load_tile(v, r0, t1, H, i_h, V, c0, BC, BKC) * b_beta[:, None]
        if I > 0:
            b_y -= tl.dot(b_aoff, load_tile(U, t0, r0, H, i_h, V, c0, BT, BKC), input_precision=DOT_PREC)
        store_tile(U, tl.dot(b_t, b_y, input_precision=DOT_PREC), r0, t1, H, i_h, V, c0, BC, BKC)


@triton.jit
def fused_intra_wy_kernel(
    q,
    k,
    v,
    G,
    beta_raw,
    Aqk,
    W,
    U,
    chunk_start,
    chunk_end,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BKC: tl.constexpr,
    BKD: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    """Per (chunk, head): Aqk, W, U of the chunk (inputs as `intra_kernel` + `solve_wy_kernel`).
    BKC: columns per dot step; BKD: columns per step of the diagonal blocks' [4, 16, 16, BKD]."""
    tl.static_assert(BT == NB * BC, "written for 4 sub-blocks per chunk")
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    o_b = tl.arange(0, NB)
    o_r = tl.arange(0, BC)
    rows = t0 + o_b[:, None] * BC + o_r[None, :]  # [NB, BC]: the chunk's rows, block by block
    m_rows = rows < t1

    # row norms of q and k (l2norm: x / sqrt(sum x^2 + 1e-6)), summed over column blocks
    rows3 = rows[:, :, None]
    o_d = tl.arange(0, BKC)[None, None, :]
    b_sq = tl.zeros([NB, BC], dtype=tl.float32)
    b_sk = tl.zeros([NB, BC], dtype=tl.float32)
    for c0 in range(0, BK, BKC):
        off = (rows3.to(tl.int64) * H + i_h) * K + c0 + o_d
        m = (rows3 < t1) & (c0 + o_d < K)
        b_x = tl.load(q + off, mask=m, other=0.0).to(tl.float32)
        b_sq += tl.sum(b_x * b_x, axis=2)
        b_x = tl.load(k + off, mask=m, other=0.0).to(tl.float32)
        b_sk += tl.sum(b_x * b_x, axis=2)
    b_nq = tl.sqrt(b_sq + 1e-6)
    b_nk = tl.sqrt(b_sk + 1e-6)
    b_beta = tl.sigmoid(
        tl.load(beta_raw + rows.to(tl.int64) * H + i_h, mask=m_rows, other=0.0).to(tl.float32)
    )

    # 1. diagonal blocks, exact exp(G_i - G_j): [NB, BC(i), BC(j), BKD] per step
    rows_i = rows[:, :, None, None]
    rows_j = rows[:, None, :, None]
    o_ii = o_r[None, :, None]
    o_jj = o_r[None, None, :]
    m_low = ((o_ii >= o_jj) & m_rows[:, :, None])[:, :, :, None]  # rows past the chunk end would overflow
    nq_i = b_nq[:, :, None, None]
    nk_i = b_nk[:, :, None, None]
    nk_j = b_nk[:, None, :, None]
    b_aqd = tl.zeros([NB, BC, BC], dtype=tl.float32)
    b_ad = tl.zeros([NB, BC, BC], dtype=tl.float32)
    for c0 in range(0, BK, BKD):
        b_gi = _load_4d(G, rows_i, t1, H, i_h, K, c0, BKD)
        b_gj = _load_4d(G, rows_j, t1, H, i_h, K, c0, BKD)
        b_kje = _load_4d(k, rows_j, t1, H, i_h, K, c0, BKD) / nk_j
        b_kje = b_kje * tl.exp(tl.where(m_low, b_gi - b_gj, float("-inf")))
        b_qi = _load_4d(q, rows_i, t1, H, i_h, K, c0, BKD) / nq_i * scale
        b_aqd += tl.sum(b_qi * b_kje, axis=3)
        b_ki = _load_4d(k, rows_i, t1, H, i_h, K, c0, BKD) / nk_i
        b_ad += tl.sum(b_ki * b_kje, axis=3)
    p_d = Aqk + (rows[:, :, None].to(tl.int64) * H + i_h) * BT + o_b[:, None, None] * BC + o_jj
    tl.store(p_d, b_aqd, mask=m_rows[:, :, None] & (o_jj < BC))
    b_ad = tl.where(o_ii > o_jj, b_ad, 0.0) * b_beta[:, :, None]

    # 2. T_II = (I + A_II)^-1 of the four blocks, forward substitution on rows
    b_t = tl.zeros([NB, BC, BC], dtype=tl.float32) + tl.where(o_ii == o_jj, 1.0, 0.0)
    for i in range(1, BC):
        sel = o_ii == i
        b_a = tl.sum(tl.where(sel, b_ad, 0.0), axis=1)  # [NB, BC]: row i of each A_II (cols < i)
        b_new = tl.where(o_r[None, :] == i, 1.0, 0.0) - tl.sum(b_a[:, :, None] * b_t, axis=1)
        b_t = tl.where(sel, b_new[:, None, :], b_t)

    # 3. block by block: off-diagonal columns, then W and U rows by substitution; each block reads
    # the W/U rows the blocks before it stored (other threads of this program: barrier first)
    b_nk_all = tl.reshape(b_nk, [BT])
    _block_row(q, k, v, G, Aqk, W, U, t0, t1, scale, i_h, b_nq, b_nk, b_nk_all, b_beta, b_t,
               H, 0, K, V, BT, BC, BK, BV, BKC, DOT_PREC)  # fmt: skip
    for I in tl.static_range(1, NB):
        if t0 + I * BC < t1:
            tl.debug_barrier()
            _block_row(q, k, v, G, Aqk, W, U, t0, t1, scale, i_h, b_nq, b_nk, b_nk_all, b_beta, b_t,
                       H, I, K, V, BT, BC, BK, BV, BKC, DOT_PREC)  # fmt: skip
