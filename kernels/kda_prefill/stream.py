"""The "stream" prefill: the chunk-local work spread over many small programs and the sequential
state scan streaming through the chunks with the output computed in it (variant "stream").

Why: the split and fused variants ran at 0.16-0.22x FLA's `chunk_kda` on the H200; by profile their
chunk-local launches were 11-23x their byte floor (many 16-row products and a serial solve per
program) and the state pass 7x (a nested loop the compiler could not pipeline), and every chunk's
starting state went to HBM and back for the output (fp32: 64 KB per chunk and head). Here, with
the math of `kernel.py` (its docstring defines G, Akk, Aqk, T, W, U, Kd, Qg):

1. `prep_kernel`   per (chunk, column block, head): G = within-chunk cumsum of the gate, e^{G_last}.
2. `diag_kernel`   per (token, BH heads): the token's reciprocal norms of q (times the attention
                   scale) and k, and its row of the diagonal 16x16 block, exact exp(G_i - G_j),
                   one column j <= i per step.
3. `offdiag_kernel` per (chunk, block pairs, head): the six off-diagonal 16x16 blocks of
                   Aqk and beta Akk by tensor-core products through the block's first row r,
                   exp(G_i - G_r) and exp(G_r - G_j) both <= 1 (no overflow for any gate), summed
                   over column blocks of K with raw q and k and scaled by the row norms after.
4. `inverse_kernel` per (chunk, head): T = (I + beta Akk)^-1 from the diagonal blocks' forward
                   substitution and block products, stored as Tinv.
5. `wu_kernel`     per (chunk, head): W = T (beta k e^G), U = T (beta v) as whole-chunk products
                   [64, 64] x [64, BKC], and Qg, Kd.
6. `scan_kernel`   per (sequence, head, V block), sequential over the sequence's chunks in one
                   loop whose loads do not depend on the state (so the compiler can prefetch the
                   next chunk): v_new = U - W S, o = Qg S + Aqk v_new (FUSE_OUT), S <- e^{G_last} S
                   + Kd^T v_new; the final state rounded once into the pool. Without FUSE_OUT (the
                   fp32 operands: a fused output spills registers) the chunk states and v_new go
                   to HBM and
7. `output_kernel` computes o per (chunk, head, V block).

Measured on the H200 (results/bench/prefill-stream-h200/): 9.2 ms at 32k with fp32 operands
(the fused variant 18.2 ms, the split one 25.6 ms, in earlier calls), the same error against
float64; at 8k/32k/128k 0.44-0.45x FLA's `chunk_kda` with fp32 operands and
1.04-1.10x with bf16 ones, 0.39x / 1.08x on a batch of 37 sequences (the bf16 scan with BV 64
and three stages; that folder's README names the calls). Every chunk-local launch numbers its
programs head first (`chunk_and_head`): 0.3-0.5 ms faster at 32k than chunk first. On an H100
(results/bench/prefill-ncu/, prefill-split/): half the fp32 scan's instructions were Triton's
emulated tf32 rounding, so the scan splits its operands by bit arithmetic (`kernels/tf32x3.py`, the
same bits), and the output launch numbers a chunk-head's V blocks side by side (its L2 hit rate was
8.5%): 9.61 -> 9.13 ms at 32k there, 0.53x FLA. The wu launch can write Kd as its tf32x3 halves
for the scan ("presplit", off by default): a 32-column scan without spills, 8.90 ms against 9.43 at
32k on an H100, but not the same last bits on the GPU (results/bench/prefill-presplit/).

Operands: DOT_PREC "tf32x3" (or "ieee") keeps every intermediate fp32 and every product at about
fp32 accuracy: evalkit's arithmetic. DOT_PREC "bf16" is the production form FLA-based servers run:
W, U, Aqk, Qg, Kd, v_new and the chunk states are bf16 operands of bf16 tensor-core products with
fp32 accumulation, the carried state fp32 (the inverse's block products stay tf32, as FLA's do),
and its default prep tile takes the gate's log from lg2.approx, as FLA's softplus does.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..tf32x3 import dot_tf32x3, dot_tf32x3_split, tf32_rna
from ..triton_common import COMPILED, load_state, round_to_bf16_bits, row_norms, store_state
from .gate import chunk_gate_cumsum
from .tiles import load_chunk_t, load_rows_vec, load_tile, load_tile_as_is, store_chunk_t, store_tile


@triton.jit
def mm(a, b, acc, DOT_PREC: tl.constexpr):
    """a @ b (+ acc, when not None) in fp32: bf16 operands when DOT_PREC == "bf16", else fp32
    operands at that input precision; "tf32x3-bits" is "tf32x3" with the operands split by bit
    arithmetic (`dot_tf32x3`: the same bits for finite operands, fewer instructions)."""
    if DOT_PREC == "tf32x3-bits":
        return dot_tf32x3(a, b, acc)
    elif DOT_PREC == "bf16":
        # Triton's CPU interpreter multiplies bf16 operands wrongly (triton 3.9: ~1e10 off); there a
        # bf16 product is computed as exact fp32 products of the bf16-rounded operands, summed in fp32
        if COMPILED:
            return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc, out_dtype=tl.float32)
        else:
            a16 = a.to(tl.bfloat16).to(tl.float32)
            return tl.dot(a16, b.to(tl.bfloat16).to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision=DOT_PREC)


@triton.jit
def chunk_and_head(HEAD_FAST: tl.constexpr, LAST: tl.constexpr):
    """(chunk, head) of a program on a grid (chunks, ..., heads) or, HEAD_FAST, (heads, ..., chunks)
    (LAST: the index of the last grid axis). Head first, programs that run side by side read
    neighbouring heads of the same rows: whole rows of [T, H, K], not one head's piece of each."""
    if HEAD_FAST:
        return tl.program_id(LAST), tl.program_id(0)
    else:
        return tl.program_id(0), tl.program_id(LAST)


# ----------------------------------------------------------------------------------------- 1
@triton.jit
def prep_kernel(
    g_raw,
    a_log,
    dt_bias,
    G,
    EGl,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BKG: tl.constexpr,
    APPROX_GATE: tl.constexpr,
    ORDER: tl.constexpr,
):
    """Per (chunk, BKG columns, head): G and e^{G_last} (`gate.chunk_gate_cumsum`, the split
    path's). The columns are independent, so a chunk's cumsum is spread over K / BKG programs.
    APPROX_GATE: the softplus's log by lg2.approx (`triton_common.kda_gate`). ORDER numbers the
    programs "head" first (grid (heads, column blocks, chunks)), "chunk" first (chunks, column
    blocks, heads) or "column" first (column blocks, chunks, heads: a head's rows in order, as
    FLA's gate kernel)."""
    if ORDER == "column":
        i_col, i_c, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    else:
        i_c, i_h = chunk_and_head(ORDER == "head", 2)
        i_col = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    chunk_gate_cumsum(
        g_raw, a_log, dt_bias, G, EGl, i_c, t0, t1, H, i_h, K, i_col * BKG, BT, BKG, APPROX_GATE
    )


# ----------------------------------------------------------------------------------------- 2
@triton.jit
def diag_kernel(
    q,
    k,
    G,
    beta_raw,
    RQ,
    RK,
    Aqk,
    Akk,
    chunk_start,
    chunk_end,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BH: tl.constexpr,
):
    """Per (token, BH heads): the token's reciprocal norms RQ = scale / |q|, RK = 1 / |k|, and its
    row of the diagonal 16x16 block: Aqk[i, j] (j <= i, zeros right of it, into Aqk) and
    beta_i Akk[i, j] (j < i, zeros elsewhere, fp32 into Akk [T, H, BT]), with the exact
    exp(G_i - G_j), one column j <= i per step and none past it (no pair is computed and
    discarded), as FLA's intra kernel is laid out. Rows j of BH neighbouring heads load together
    (one contiguous piece of [T, H, K]); 1 / |k_j| is computed in the step. Programs are numbered
    token first, so neighbours reread the same rows j. (Measured faster than per BR rows of one
    head, which it replaced: results/bench/prefill-stream-h200/README.md.)"""
    pid = tl.program_id(0)
    i_c = pid // BT
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    t = t0 + pid % BT
    if t < t1:
        b = t0 + ((t - t0) // BC) * BC  # first row (and column) of the block
        o_h = tl.program_id(1) * BH + tl.arange(0, BH)
        o_k = tl.arange(0, BK)
        o_j = tl.arange(0, BC)
        m_h = o_h < H
        m_hk = m_h[:, None] & (o_k < K)[None, :]
        row = t.to(tl.int64) * H + o_h  # [BH]: row t of each head
        p_t = row[:, None] * K + o_k[None, :]
        b_q = tl.load(q + p_t, mask=m_hk, other=0.0).to(tl.float32)
        b_k = tl.load(k + p_t, mask=m_hk, other=0.0).to(tl.float32)
        b_g = tl.load(G + p_t, mask=m_hk, other=0.0)
        rq = scale / row_norms(b_q)
        rk = 1.0 / row_norms(b_k)
        tl.store(RQ + row, rq, mask=m_h)
        tl.store(RK + row, rk, mask=m_h)
        bk = tl.sigmoid(tl.load(beta_raw + row, mask=m_h, other=0.0).to(tl.float32)) * rk  # beta_i / |k_i|
        p_a = row * BT + (b - t0)  # column 0 of the diagonal block in row t's Aqk / Akk
        for j in range(b, t + 1):
            p_j = (o_h.to(tl.int64) + j * H)[:, None] * K + o_k[None, :]
            b_kj = tl.load(k + p_j, mask=m_hk, other=0.0).to(tl.float32)
            b_kje = b_kj * tl.exp(b_g - tl.load(G + p_j, mask=m_hk, other=0.0))  # G_i <= G_j: <= 1
            ck = 1.0 / row_norms(b_kj)
            aqk = tl.sum(b_q * b_kje, axis=1) * rq * ck
            tl.store(Aqk + p_a + (j - b), aqk.to(Aqk.dtype.element_ty), mask=m_h)
            akk = tl.where(j < t, tl.sum(b_k * b_kje, axis=1) * bk * ck, 0.0)
            tl.store(Akk + p_a + (j - b), akk, mask=m_h)
        # the block's columns right of the token: zeros (written by this program only: no race)
        m_z = m_h[:, None] & (o_j > t - b)[None, :]
        z = tl.zeros([BH, BC], dtype=tl.float32)
        tl.store(Aqk + p_a[:, None] + o_j[None, :], z.to(Aqk.dtype.element_ty), mask=m_z)
        tl.store(Akk + p_a[:, None] + o_j[None, :], z, mask=m_z)


# ----------------------------------------------------------------------------------------- 3
# programs per (chunk, head) of `offdiag_kernel` for each GROUP (its grid's axis 1)
OFFDIAG_PROGRAMS = {"pair": 6, "row": 3, "chunk": 1}


@triton.jit
def offdiag_kernel(
    q,
    k,
    G,
    beta_raw,
    RQ,
    RK,
    Akk,
    Aqk,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BKC: tl.constexpr,
    DOT_PREC: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_FAST: tl.constexpr,
):
    """Per (chunk, group of block pairs, head): the six off-diagonal 16x16 blocks (I, J), J < I, of
    Aqk and beta Akk, by tensor-core products through the row block's first row r (exp(G_i - G_r)
    and exp(G_r - G_j) both <= 1: no overflow for any gate), summed over column blocks of K with
    raw q and k and scaled by the row norms after. One block at a time keeps the registers few
    (all six at once ran at 255 registers, 4 programs per SM); GROUP is how many a program does
    one after the other: "pair" (grid axis 1 = 6), "row" (the blocks of row block I = 1, 2, 3:
    q, k, G of block I reread from L1) or "chunk" (all six)."""
    tl.static_assert(BT == 4 * BC, "written for 4 sub-blocks per chunk")
    i_c, i_h = chunk_and_head(HEAD_FAST, 2)
    i_g = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    # pairs p in the order (1,0) (2,0) (2,1) (3,0) (3,1) (3,2): row block I holds p in [I(I-1)/2, I(I+1)/2)
    if GROUP == "pair":
        p_lo = i_g
        p_hi = i_g + 1
    elif GROUP == "row":
        p_lo = i_g * (i_g + 1) // 2
        p_hi = (i_g + 1) * (i_g + 2) // 2
    else:
        p_lo = 0
        p_hi = 6
    for p in range(p_lo, p_hi):
        bi = 1 + (p + 5) // 6 + (p + 3) // 6  # 1 + [p >= 1] + [p >= 3] for p in 0..5
        bj = p - bi * (bi - 1) // 2
        ri = t0 + bi * BC  # first row of block I (the reference row r)
        rj = t0 + bj * BC
        if ri < t1:
            _offdiag_block(
                q, k, G, beta_raw, RQ, RK, Akk, Aqk, ri, rj, bj, t1, H, i_h, K, BT, BC, BK, BKC, DOT_PREC
            )  # fmt: skip


@triton.jit
def _offdiag_block(
    q, k, G, beta_raw, RQ, RK, Akk, Aqk, ri, rj, bj, t1, H, i_h,
    K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr, BKC: tl.constexpr,
    DOT_PREC: tl.constexpr,
):  # fmt: skip
    """Block (I, J) of Aqk and beta Akk: rows ri.. (block I), columns rj.. (block J = bj)."""
    o_i = tl.arange(0, BC)
    m_i = ri + o_i < t1
    acc_k = tl.zeros([BC, BC], dtype=tl.float32)
    acc_q = tl.zeros([BC, BC], dtype=tl.float32)
    for c0 in range(0, BK, BKC):
        k_i = load_tile(k, ri, t1, H, i_h, K, c0, BC, BKC)
        q_i = load_tile(q, ri, t1, H, i_h, K, c0, BC, BKC)
        g_i = load_tile(G, ri, t1, H, i_h, K, c0, BC, BKC)
        k_j = load_tile(k, rj, t1, H, i_h, K, c0, BC, BKC)
        g_j = load_tile(G, rj, t1, H, i_h, K, c0, BC, BKC)
        o_k = c0 + tl.arange(0, BKC)
        g_r = tl.load(G + (ri.to(tl.int64) * H + i_h) * K + o_k, mask=o_k < K, other=0.0)[None, :]
        e_i = tl.exp(tl.where(m_i[:, None], g_i - g_r, 0.0))  # rows past the end: exponent 0
        kt = tl.trans(k_j * tl.exp(g_r - g_j))
        acc_k = mm(k_i * e_i, kt, acc_k, DOT_PREC)
        acc_q = mm(q_i * e_i, kt, acc_q, DOT_PREC)
    ck = load_rows_vec(RK, rj + o_i, rj + o_i < t1, H, i_h)[None, :]  # 1/|k_j| along columns
    rk = load_rows_vec(RK, ri + o_i, m_i, H, i_h)
    rq = load_rows_vec(RQ, ri + o_i, m_i, H, i_h)
    bk = tl.sigmoid(load_rows_vec(beta_raw, ri + o_i, m_i, H, i_h)) * rk  # beta_i / |k_i|
    store_tile(Aqk, acc_q * rq[:, None] * ck, ri, t1, H, i_h, BT, bj * BC, BC, BC)
    store_tile(Akk, acc_k * bk[:, None] * ck, ri, t1, H, i_h, BT, bj * BC, BC, BC)


# ----------------------------------------------------------------------------------------- 4
@triton.jit
def _diag_block_t(Akk, r, c0, t1, H, i_h, BT: tl.constexpr, BC: tl.constexpr):
    """The diagonal block of beta Akk at rows r.., columns c0.. transposed, [m, i] = A[r + i, c0 + m]
    (rows past t1 read as 0)."""
    o = tl.arange(0, BC)
    rows = r + o
    ptr = Akk + (rows.to(tl.int64)[None, :] * H + i_h) * BT + c0 + o[:, None]
    return tl.load(ptr, mask=(rows < t1)[None, :], other=0.0)


@triton.jit
def _inv_diag4(Akk, r0, t1, H, i_h, BT: tl.constexpr, BC: tl.constexpr):
    """(I + A_II)^-1 of the chunk's four strictly lower diagonal blocks by forward substitution on
    rows, the four chains side by side. The blocks are loaded once, transposed, so that row i of a
    block is a column of the tile, picked without a load or a layout change in the loop."""
    o = tl.arange(0, BC)
    a_0 = _diag_block_t(Akk, r0, 0, t1, H, i_h, BT, BC)
    a_1 = _diag_block_t(Akk, r0 + BC, BC, t1, H, i_h, BT, BC)
    a_2 = _diag_block_t(Akk, r0 + 2 * BC, 2 * BC, t1, H, i_h, BT, BC)
    a_3 = _diag_block_t(Akk, r0 + 3 * BC, 3 * BC, t1, H, i_h, BT, BC)
    eye = tl.where(o[:, None] == o[None, :], 1.0, 0.0)
    t_0, t_1, t_2, t_3 = eye, eye, eye, eye
    for i in range(1, BC):
        e_i = tl.where(o == i, 1.0, 0.0)
        sel = (o == i)[:, None]
        col = (o == i)[None, :]
        a = tl.sum(tl.where(col, a_0, 0.0), axis=1)  # A[i, m] for m < i (0 elsewhere), along m
        t_0 = tl.where(sel, (e_i - tl.sum(a[:, None] * t_0, axis=0))[None, :], t_0)
        a = tl.sum(tl.where(col, a_1, 0.0), axis=1)
        t_1 = tl.where(sel, (e_i - tl.sum(a[:, None] * t_1, axis=0))[None, :], t_1)
        a = tl.sum(tl.where(col, a_2, 0.0), axis=1)
        t_2 = tl.where(sel, (e_i - tl.sum(a[:, None] * t_2, axis=0))[None, :], t_2)
        a = tl.sum(tl.where(col, a_3, 0.0), axis=1)
        t_3 = tl.where(sel, (e_i - tl.sum(a[:, None] * t_3, axis=0))[None, :], t_3)
    return t_0, t_1, t_2, t_3


@triton.jit
def inverse_kernel(
    Akk,
    Aqk,
    Tinv,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    SOLVE_PREC: tl.constexpr,
    HEAD_FAST: tl.constexpr,
):
    """Per (chunk, head): T = (I + beta Akk)^-1 into Tinv [T, H, BT], the diagonal blocks by forward
    substitution, the others by block products; zeros above the diagonal of Tinv and Aqk (the
    scan reads whole rows). Blocks are named by (row block, column block): a21 = beta Akk rows
    32-47, columns 16-31."""
    tl.static_assert(BT == 4 * BC, "written for 4 sub-blocks per chunk")
    i_c, i_h = chunk_and_head(HEAD_FAST, 1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    r1 = t0 + BC
    r2 = t0 + 2 * BC
    r3 = t0 + 3 * BC
    a10 = load_tile(Akk, r1, t1, H, i_h, BT, 0, BC, BC)
    a20 = load_tile(Akk, r2, t1, H, i_h, BT, 0, BC, BC)
    a21 = load_tile(Akk, r2, t1, H, i_h, BT, BC, BC, BC)
    a30 = load_tile(Akk, r3, t1, H, i_h, BT, 0, BC, BC)
    a31 = load_tile(Akk, r3, t1, H, i_h, BT, BC, BC, BC)
    a32 = load_tile(Akk, r3, t1, H, i_h, BT, 2 * BC, BC, BC)
    t00, t11, t22, t33 = _inv_diag4(Akk, t0, t1, H, i_h, BT, BC)
    t10, t21, t20, t32, t31, t30 = _merged(t00, t11, t22, t33, a10, a20, a21, a30, a31, a32, SOLVE_PREC)
    store_tile(Tinv, t00, t0, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Tinv, t10, r1, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Tinv, t11, r1, t1, H, i_h, BT, BC, BC, BC)
    store_tile(Tinv, t20, r2, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Tinv, t21, r2, t1, H, i_h, BT, BC, BC, BC)
    store_tile(Tinv, t22, r2, t1, H, i_h, BT, 2 * BC, BC, BC)
    store_tile(Tinv, t30, r3, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Tinv, t31, r3, t1, H, i_h, BT, BC, BC, BC)
    store_tile(Tinv, t32, r3, t1, H, i_h, BT, 2 * BC, BC, BC)
    store_tile(Tinv, t33, r3, t1, H, i_h, BT, 3 * BC, BC, BC)
    z = tl.zeros([BC, BC], dtype=tl.float32)
    _zeros_above(Tinv, z, t0, t1, H, i_h, BT, BC)
    _zeros_above(Aqk, z, t0, t1, H, i_h, BT, BC)


@triton.jit
def _merged(t00, t11, t22, t33, a10, a20, a21, a30, a31, a32, SOLVE_PREC: tl.constexpr):
    """The blocks of T below the diagonal, T_IJ = -T_II sum_{J<=M<I} A_IM T_MJ, from the diagonal
    blocks' inverses and beta Akk's off-diagonal blocks."""
    t10 = -mm(t11, mm(a10, t00, None, SOLVE_PREC), None, SOLVE_PREC)
    t21 = -mm(t22, mm(a21, t11, None, SOLVE_PREC), None, SOLVE_PREC)
    t20 = -mm(t22, mm(a21, t10, mm(a20, t00, None, SOLVE_PREC), SOLVE_PREC), None, SOLVE_PREC)
    t32 = -mm(t33, mm(a32, t22, None, SOLVE_PREC), None, SOLVE_PREC)
    t31 = -mm(t33, mm(a32, t21, mm(a31, t11, None, SOLVE_PREC), SOLVE_PREC), None, SOLVE_PREC)
    t30 = mm(a32, t20, mm(a31, t10, mm(a30, t00, None, SOLVE_PREC), SOLVE_PREC), SOLVE_PREC)
    t30 = -mm(t33, t30, None, SOLVE_PREC)
    return t10, t21, t20, t32, t31, t30


@triton.jit
def _zeros_above(A, z, t0, t1, H, i_h, BT: tl.constexpr, BC: tl.constexpr):
    """Zeros into the six blocks above the diagonal of a chunk's [BT, BT] rows of A [T, H, BT]."""
    store_tile(A, z, t0, t1, H, i_h, BT, BC, BC, BC)
    store_tile(A, z, t0, t1, H, i_h, BT, 2 * BC, BC, BC)
    store_tile(A, z, t0, t1, H, i_h, BT, 3 * BC, BC, BC)
    store_tile(A, z, t0 + BC, t1, H, i_h, BT, 2 * BC, BC, BC)
    store_tile(A, z, t0 + BC, t1, H, i_h, BT, 3 * BC, BC, BC)
    store_tile(A, z, t0 + 2 * BC, t1, H, i_h, BT, 3 * BC, BC, BC)


# ----------------------------------------------------------------------------------------- 5
@triton.jit
def wu_kernel(
    q,
    k,
    v,
    G,
    beta_raw,
    RQ,
    RK,
    Tinv,
    W,
    U,
    Qg,
    Kd,
    Kdlo,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BKC: tl.constexpr,
    DOT_PREC: tl.constexpr,
    HEAD_FAST: tl.constexpr,
    PRESPLIT: tl.constexpr,
):
    """Per (chunk, head): W = T (beta k e^G), U = T (beta v) as whole-chunk products [BT, BT] x
    [BT, BKC], and the scan's Kd = k e^{G_last - G} and Qg = q e^G. PRESPLIT (fp32 operands): Kd as
    its tf32x3 halves, hi = tf32_rna(Kd) into Kd and lo = Kd - hi into Kdlo, both chunk-transposed
    ([chunks, H, K, BT], `tiles.store_chunk_t`), for the scan's PRESPLIT."""
    i_c, i_h = chunk_and_head(HEAD_FAST, 1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    o_t = tl.arange(0, BT)
    m_t = t0 + o_t < t1
    b_t = load_tile_as_is(Tinv, t0, t1, H, i_h, BT, 0, BT, BT)
    b_beta = tl.sigmoid(load_rows_vec(beta_raw, t0 + o_t, m_t, H, i_h))[:, None]
    b_rk = load_rows_vec(RK, t0 + o_t, m_t, H, i_h)[:, None]
    b_rq = load_rows_vec(RQ, t0 + o_t, m_t, H, i_h)[:, None]
    for c0 in range(0, BK, BKC):
        o_k = c0 + tl.arange(0, BKC)
        b_gl = tl.load(G + ((t1 - 1).to(tl.int64) * H + i_h) * K + o_k, mask=o_k < K, other=0.0)[None, :]
        b_g = load_tile(G, t0, t1, H, i_h, K, c0, BT, BKC)
        b_k = load_tile(k, t0, t1, H, i_h, K, c0, BT, BKC) * b_rk
        b_kd = b_k * tl.exp(tl.where(m_t[:, None], b_gl - b_g, 0.0))  # 0 on rows past t1 (k is)
        if PRESPLIT:
            hi = tf32_rna(b_kd)
            store_chunk_t(Kd, hi, i_c, H, i_h, K, c0, BT, BKC)
            store_chunk_t(Kdlo, b_kd - hi, i_c, H, i_h, K, c0, BT, BKC)
        else:
            store_tile(Kd, b_kd, t0, t1, H, i_h, K, c0, BT, BKC)
        b_g = tl.exp(b_g)
        store_tile(W, mm(b_t, b_k * b_g * b_beta, None, DOT_PREC), t0, t1, H, i_h, K, c0, BT, BKC)
        b_q = load_tile(q, t0, t1, H, i_h, K, c0, BT, BKC) * b_rq
        store_tile(Qg, b_q * b_g, t0, t1, H, i_h, K, c0, BT, BKC)
    for c0 in range(0, BV, BKC):
        b_v = load_tile(v, t0, t1, H, i_h, V, c0, BT, BKC) * b_beta
        store_tile(U, mm(b_t, b_v, None, DOT_PREC), t0, t1, H, i_h, V, c0, BT, BKC)


# ----------------------------------------------------------------------------------------- 6
@triton.jit
def _state_half(pool_row, has_init, o_k, o_v, K: tl.constexpr, V: tl.constexpr, STORAGE: tl.constexpr):
    """Rows o_k of the starting state (zeros for a new sequence), widened to fp32."""
    k_lim = tl.where(has_init, K, 0)
    return load_state(
        pool_row + o_k[:, None] * V + o_v[None, :], (o_k < k_lim)[:, None] & (o_v < V)[None, :], STORAGE
    )


@triton.jit
def _chunk_kd_t(Kd, Kdlo, i_c, t0, t1, H, i_h, K: tl.constexpr, BT: tl.constexpr, BKH: tl.constexpr,
                PRESPLIT: tl.constexpr):  # fmt: skip
    """Kd^T of the chunk as two halves of K [BKH, BT], and with PRESPLIT their low tf32x3 halves
    (read as written, chunk-transposed; else the same tiles again, unused)."""
    if PRESPLIT:
        k1 = load_chunk_t(Kd, i_c, H, i_h, K, 0, BT, BKH)
        k2 = load_chunk_t(Kd, i_c, H, i_h, K, BKH, BT, BKH)
        return (
            k1,
            k2,
            load_chunk_t(Kdlo, i_c, H, i_h, K, 0, BT, BKH),
            load_chunk_t(Kdlo, i_c, H, i_h, K, BKH, BT, BKH),
        )
    else:
        k1 = tl.trans(load_tile_as_is(Kd, t0, t1, H, i_h, K, 0, BT, BKH))
        k2 = tl.trans(load_tile_as_is(Kd, t0, t1, H, i_h, K, BKH, BT, BKH))
        return k1, k2, k1, k2


@triton.jit
def _mm_halves(a, a_lo, b, acc, DOT_PREC: tl.constexpr, PRESPLIT: tl.constexpr):
    """a @ b (+ acc): with PRESPLIT, a and a_lo are a's tf32x3 halves (`dot_tf32x3_split`), else
    a_lo is unused (`mm`)."""
    if PRESPLIT:
        return dot_tf32x3_split(a, a_lo, b, acc)
    else:
        return mm(a, b, acc, DOT_PREC)


@triton.jit(do_not_specialize=["sr_key"])
def scan_kernel(
    Kd,
    EGl,
    W,
    Kdlo,
    U,
    Qg,
    Aqk,
    Vn,
    Hs,
    o,
    pool,
    slots,
    positions,
    sr_key,
    cu_seqlens,
    chunk_offsets,
    has_initial_state,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BKH: tl.constexpr,
    BV: tl.constexpr,
    DOT_PREC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
    INTRA_BF16: tl.constexpr,
    FUSE_OUT: tl.constexpr,
    PRESPLIT: tl.constexpr,
):
    """The state as two row halves S1 = S[:BKH], S2 = S[BKH:2 BKH] (BKH >= K / 2): every product
    is split along K, so no operand tile is wider than BKH (fp32 operands of tf32x3 products at
    K = 128 spill registers otherwise). PRESPLIT: Kd^T as the tf32x3 halves `wu_kernel` wrote, fed
    to the tensor cores from shared memory as loaded (fewer registers; on the GPU not the same
    last bits as splitting it here: results/bench/prefill-presplit/)."""
    i_nh = tl.program_id(0)  # N*H can exceed the 65535 limit of grid axes 1 and 2
    i_v = tl.program_id(1)
    i_n = i_nh // H
    i_h = i_nh % H
    bos = tl.load(cu_seqlens + i_n).to(tl.int32)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int32)
    c_first = tl.load(chunk_offsets + i_n).to(tl.int64)
    n_chunks = tl.cdiv(eos - bos, BT)
    v0 = i_v * BV

    o_k1 = tl.arange(0, BKH)
    o_k2 = BKH + tl.arange(0, BKH)
    o_v = v0 + tl.arange(0, BV)
    slot = tl.load(slots + i_n).to(tl.int64)
    pool_row = pool + (slot * H + i_h) * K * V
    has_init = tl.load(has_initial_state + i_n) != 0
    b_s1 = _state_half(pool_row, has_init, o_k1, o_v, K, V, STORAGE)
    b_s2 = _state_half(pool_row, has_init, o_k2, o_v, K, V, STORAGE)

    for i_t in range(0, n_chunks):
        t0 = bos + i_t * BT
        t1 = tl.minimum(t0 + BT, eos)
        i_c = c_first + i_t
        # the chunk's operands first: none depends on the state
        b_w1 = load_tile_as_is(W, t0, t1, H, i_h, K, 0, BT, BKH)
        b_w2 = load_tile_as_is(W, t0, t1, H, i_h, K, BKH, BT, BKH)
        b_u = load_tile(U, t0, t1, H, i_h, V, v0, BT, BV)
        b_k1, b_k2, b_kl1, b_kl2 = _chunk_kd_t(Kd, Kdlo, i_c, t0, t1, H, i_h, K, BT, BKH, PRESPLIT)
        p_el = EGl + (i_c * H + i_h) * K
        b_el1 = tl.load(p_el + o_k1, mask=o_k1 < K, other=0.0)
        b_el2 = tl.load(p_el + o_k2, mask=o_k2 < K, other=0.0)
        b_vn = b_u - mm(b_w2, b_s2, mm(b_w1, b_s1, None, DOT_PREC), DOT_PREC)
        if FUSE_OUT:
            b_qg1 = load_tile_as_is(Qg, t0, t1, H, i_h, K, 0, BT, BKH)
            b_qg2 = load_tile_as_is(Qg, t0, t1, H, i_h, K, BKH, BT, BKH)
            b_a = load_tile_as_is(Aqk, t0, t1, H, i_h, BT, 0, BT, BT)
            b_o = mm(b_a, b_vn, mm(b_qg2, b_s2, mm(b_qg1, b_s1, None, DOT_PREC), DOT_PREC), DOT_PREC)
            store_tile(o, b_o, t0, t1, H, i_h, V, v0, BT, BV)
        else:
            p_hs = Hs + (i_c * H + i_h) * K * V + o_v[None, :]
            m_v = (o_v < V)[None, :]
            tl.store(p_hs + o_k1[:, None] * V, b_s1.to(Hs.dtype.element_ty), mask=(o_k1 < K)[:, None] & m_v)
            tl.store(p_hs + o_k2[:, None] * V, b_s2.to(Hs.dtype.element_ty), mask=(o_k2 < K)[:, None] & m_v)
            store_tile(Vn, b_vn, t0, t1, H, i_h, V, v0, BT, BV)
        b_s1 = b_s1 * b_el1[:, None] + _mm_halves(b_k1, b_kl1, b_vn, None, DOT_PREC, PRESPLIT)
        b_s2 = b_s2 * b_el2[:, None] + _mm_halves(b_k2, b_kl2, b_vn, None, DOT_PREC, PRESPLIT)
        if INTRA_BF16:
            if i_t + 1 < n_chunks:
                b_s1 = round_to_bf16_bits(b_s1, False).to(tl.float32)
                b_s2 = round_to_bf16_bits(b_s2, False).to(tl.float32)

    if ROUNDING == "sr":
        pos = tl.load(positions + i_n)
    else:
        pos = 0
    m_v = (o_v < V)[None, :]
    o_s = o_k1[:, None] * V + o_v[None, :]
    s1 = store_state(b_s1, i_h * K * V + o_s, pos, sr_key, STORAGE, MANT_BITS, ROUNDING)
    tl.store(pool_row + o_s, s1, mask=(o_k1 < K)[:, None] & m_v)
    o_s = o_k2[:, None] * V + o_v[None, :]
    s2 = store_state(b_s2, i_h * K * V + o_s, pos, sr_key, STORAGE, MANT_BITS, ROUNDING)
    tl.store(pool_row + o_s, s2, mask=(o_k2 < K)[:, None] & m_v)


# ----------------------------------------------------------------------------------------- 7
@triton.jit
def output_kernel(
    Qg,
    Aqk,
    Vn,
    Hs,
    o,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    DOT_PREC: tl.constexpr,
    ORDER: tl.constexpr,
):
    """o = Qg S_start + Aqk v_new per (chunk, head, V block): the scan without FUSE_OUT. ORDER
    "chunk": grid (chunks, heads, V blocks), chunk first; "head": grid (V blocks x heads, chunks),
    a chunk-head's V blocks side by side and then the heads of the same rows, so the second V
    block reads that chunk's Qg and Aqk rows from L2 (chunk first, they are chunks x heads programs
    apart, and Nsight Compute saw an 8.5% L2 hit rate: each read twice from HBM)."""
    if ORDER == "head":
        NV: tl.constexpr = (V + BV - 1) // BV
        i_h = tl.program_id(0) // NV
        v0 = (tl.program_id(0) % NV) * BV
        i_c = tl.program_id(1)
    else:
        i_c = tl.program_id(0)
        i_h = tl.program_id(1)
        v0 = tl.program_id(2) * BV
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    o_k = tl.arange(0, BK)
    o_v = v0 + tl.arange(0, BV)
    m_s = (o_k < K)[:, None] & (o_v < V)[None, :]
    p_s = Hs + (i_c.to(tl.int64) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
    b_s = tl.load(p_s, mask=m_s, other=0.0)
    b_qg = load_tile_as_is(Qg, t0, t1, H, i_h, K, 0, BT, BK)
    b_a = load_tile_as_is(Aqk, t0, t1, H, i_h, BT, 0, BT, BT)
    b_vn = load_tile_as_is(Vn, t0, t1, H, i_h, V, v0, BT, BV)
    store_tile(o, mm(b_a, b_vn, mm(b_qg, b_s, None, DOT_PREC), DOT_PREC), t0, t1, H, i_h, V, v0, BT, BV)
