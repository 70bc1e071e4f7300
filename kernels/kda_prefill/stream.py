"""The "stream" prefill: the chunk-local work spread over many small programs and the sequential
state scan streaming through the chunks with the output computed in it (variant "stream").

Why: the split and fused variants ran at 0.16-0.22x FLA's `chunk_kda` on the H200; by profile their
chunk-local launches were 11-23x their byte floor (many 16-row products and a serial solve per
program) and the state pass 7x (a nested loop the compiler could not pipeline), and every chunk's
starting state went to HBM and back for the output (fp32: 64 KB per chunk and head). Here, with
the math of `kernel.py` (its docstring defines G, Akk, Aqk, T, W, U, Kd, Qg):

1. `prep_kernel`   per (chunk, head, column block): G = within-chunk cumsum of the gate, e^{G_last}.
2. `diag_kernel`   per (chunk, BR rows, head): the rows' reciprocal norms of q (times the attention
                   scale) and k, and their part of the four diagonal 16x16 blocks, exact
                   exp(G_i - G_j), one column j of all BR rows per step (j <= the last row only).
3. `solve_kernel`  per (chunk, head): the six off-diagonal 16x16 blocks of Aqk and Akk by
                   tensor-core products through the block's first row r, exp(G_i - G_r) and
                   exp(G_r - G_j) both <= 1 (no overflow for any gate), summed over column blocks
                   of K with raw q and k and scaled by the row norms after (every load of a column
                   block issued at once); T = (I + Akk)^-1 from the diagonal blocks' forward
                   substitution and block products, stored as Tinv.
4. `wu_kernel`     per (chunk, head): W = T (beta k e^G), U = T (beta v) as whole-chunk products
                   [64, 64] x [64, BKC], and Qg, Kd.
5. `scan_kernel`   per (sequence, head, V block), sequential over the sequence's chunks in one
                   loop whose loads do not depend on the state (so the compiler can prefetch the
                   next chunk): v_new = U - W S, o = Qg S + Aqk v_new (FUSE_OUT), S <- e^{G_last} S
                   + Kd^T v_new; the final state rounded once into the pool. Without FUSE_OUT (the
                   fp32 operands: a fused output spills registers) the chunk states and v_new go
                   to HBM and
6. `output_kernel` computes o per (chunk, head, V block).

Measured on the H200 (results/bench/prefill-stream-h200/): 1.5x the fused and 2.1x the split
variant at 32k with fp32 operands, the same error against float64; at 32k 0.34x FLA's
`chunk_kda` with fp32 operands and 0.68-0.72x with bf16 ones (call4, call6).

Operands: DOT_PREC "tf32x3" (or "ieee") keeps every intermediate fp32 and every product at about
fp32 accuracy: evalkit's arithmetic. DOT_PREC "bf16" is the production form FLA-based servers run:
W, U, Aqk, Qg, Kd, v_new and the chunk states are bf16 operands of bf16 tensor-core products with
fp32 accumulation, the carried state fp32 (the inverse's block products stay tf32, as FLA's do).
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

from ..triton_common import load_state, round_to_bf16_bits, row_norms, store_state
from .kernel import chunk_gate_cumsum
from .tiles import load_rows_vec, load_tile, load_tile_as_is, store_tile

# Triton's CPU interpreter multiplies bf16 operands wrongly (triton 3.9: ~1e10 off); there a bf16
# product is computed as exact fp32 products of the bf16-rounded operands, summed in fp32.
_NATIVE_BF16_DOT = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")


@triton.jit
def mm(a, b, acc, DOT_PREC: tl.constexpr):
    """a @ b (+ acc, when not None) in fp32: bf16 operands when DOT_PREC == "bf16", else fp32
    operands at that input precision."""
    if DOT_PREC == "bf16":
        if _NATIVE_BF16_DOT:
            return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc, out_dtype=tl.float32)
        else:
            a16 = a.to(tl.bfloat16).to(tl.float32)
            return tl.dot(a16, b.to(tl.bfloat16).to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision=DOT_PREC)


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
):
    """Per (chunk, head, BKG columns): G and e^{G_last} (`kernel.chunk_gate_cumsum`, the split
    path's). The columns are independent, so a chunk's cumsum is spread over K / BKG programs."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    c0 = tl.program_id(2) * BKG
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    chunk_gate_cumsum(g_raw, a_log, dt_bias, G, EGl, i_c, t0, t1, H, i_h, K, c0, BT, BKG)


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
    Akkd,
    chunk_start,
    chunk_end,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BR: tl.constexpr,
):
    """Per (chunk, BR rows, head): the rows' reciprocal norms RQ = scale / |q|, RK = 1 / |k|, and
    their part of the diagonal 16x16 block: Aqk[i, j] (j <= i, zeros right of it, into Aqk) and
    beta_i Akk[i, j] (j < i, zeros elsewhere, fp32 into Akkd [T, H, BC]), with the exact
    exp(G_i - G_j), column j of all BR rows at once. Rows in the lower part of a block need more
    columns: BR < BC skips the pairs j > i that a whole block would compute and discard."""
    tl.static_assert(BC % BR == 0, "a program's rows lie in one diagonal block")
    i_c = tl.program_id(0)
    i_h = tl.program_id(2)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    s = t0 + tl.program_id(1) * BR  # the program's first row
    if s < t1:
        b = t0 + ((s - t0) // BC) * BC  # first row (and column) of the block
        o_i = tl.arange(0, BR)
        o_j = tl.arange(0, BC)
        o_k = tl.arange(0, BK)
        m_i = s + o_i < t1
        b_q = load_tile(q, s, t1, H, i_h, K, 0, BR, BK)
        b_k = load_tile(k, s, t1, H, i_h, K, 0, BR, BK)
        b_g = load_tile(G, s, t1, H, i_h, K, 0, BR, BK)
        rq = scale / row_norms(b_q)
        rk = 1.0 / row_norms(b_k)
        rows = (s + o_i).to(tl.int64) * H + i_h
        tl.store(RQ + rows, rq, mask=m_i)
        tl.store(RK + rows, rk, mask=m_i)
        if BR == BC:
            ck = rk[None, :]  # 1 / |k_j| along columns: the program's rows are the block's
        else:
            b_kb = load_tile(k, b, t1, H, i_h, K, 0, BC, BK)
            ck = (1.0 / row_norms(b_kb))[None, :]
        acc_q = tl.zeros([BR, BC], dtype=tl.float32)
        acc_k = tl.zeros([BR, BC], dtype=tl.float32)
        i_rel = (s - b) + o_i  # the rows' index within the block
        for jj in range(0, tl.minimum(s - b + BR, t1 - b)):
            row_j = (b + jj).to(tl.int64) * H + i_h
            live = ((i_rel >= jj) & m_i)[:, None]  # pairs j > i never reach exp: no overflow
            # row j loaded once per row i, in the rows' own layout (a [BK] load broadcast to the
            # rows went through shared memory, with barriers, on every step)
            ptr_j = row_j * K + o_k[None, :] + 0 * o_i[:, None]
            m_j = live & (o_k < K)[None, :]
            b_kj = tl.load(k + ptr_j, mask=m_j, other=0.0).to(tl.float32)
            b_gj = tl.load(G + ptr_j, mask=m_j, other=0.0)
            b_kje = b_kj * tl.exp(tl.where(live, b_g - b_gj, float("-inf")))
            sel = (o_j == jj)[None, :]
            acc_q = tl.where(sel, tl.sum(b_q * b_kje, axis=1)[:, None], acc_q)
            acc_k = tl.where(sel, tl.sum(b_k * b_kje, axis=1)[:, None], acc_k)
        b_beta = tl.sigmoid(load_rows_vec(beta_raw, s + o_i, m_i, H, i_h))
        acc_q = acc_q * rq[:, None] * ck
        acc_k = tl.where(o_j[None, :] < i_rel[:, None], acc_k * (b_beta * rk)[:, None] * ck, 0.0)
        store_tile(Aqk, acc_q, s, t1, H, i_h, BT, b - t0, BR, BC)
        store_tile(Akkd, acc_k, s, t1, H, i_h, BC, 0, BR, BC)


# ----------------------------------------------------------------------------------------- 3
@triton.jit
def _diag_block_t(Akkd, r, t1, H, i_h, BC: tl.constexpr):
    """A diagonal block of beta Akk transposed, [m, i] = A[r + i, m] (rows past t1 read as 0)."""
    o = tl.arange(0, BC)
    rows = r + o
    ptr = Akkd + (rows.to(tl.int64)[None, :] * H + i_h) * BC + o[:, None]
    return tl.load(ptr, mask=(rows < t1)[None, :], other=0.0)


@triton.jit
def _inv_diag4(Akkd, r0, t1, H, i_h, BC: tl.constexpr):
    """(I + A_II)^-1 of the chunk's four strictly lower diagonal blocks by forward substitution on
    rows, the four chains side by side. The blocks are loaded once, transposed, so that row i of a
    block is a column of the tile, picked without a load or a layout change in the loop."""
    o = tl.arange(0, BC)
    a_0 = _diag_block_t(Akkd, r0, t1, H, i_h, BC)
    a_1 = _diag_block_t(Akkd, r0 + BC, t1, H, i_h, BC)
    a_2 = _diag_block_t(Akkd, r0 + 2 * BC, t1, H, i_h, BC)
    a_3 = _diag_block_t(Akkd, r0 + 3 * BC, t1, H, i_h, BC)
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
def _ref_row(G, r, t1, H, i_h, K: tl.constexpr, c0, BKC: tl.constexpr):
    """G of the reference row r (the first of a block), [1, BKC]; a block that starts past the
    chunk end takes the chunk's last row, so the decays through it stay <= 1 (its q, k are 0)."""
    o_k = c0 + tl.arange(0, BKC)
    r = tl.minimum(r, t1 - 1)
    return tl.load(G + (r.to(tl.int64) * H + i_h) * K + o_k, mask=o_k < K, other=0.0)[None, :]


@triton.jit
def solve_kernel(
    q,
    k,
    G,
    beta_raw,
    RQ,
    RK,
    Akkd,
    Aqk,
    Tinv,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BKC: tl.constexpr,
    DOT_PREC: tl.constexpr,
    SOLVE_PREC: tl.constexpr,
):
    """Per (chunk, head): Aqk's and beta Akk's off-diagonal blocks, then T = (I + Akk)^-1 into Tinv
    [T, H, BT] (zeros above the diagonal). Blocks are named by (row block, column block): a21 =
    beta Akk rows 32-47, columns 16-31."""
    tl.static_assert(BT == 4 * BC, "written for 4 sub-blocks per chunk")
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    o_i = tl.arange(0, BC)
    r1 = t0 + BC
    r2 = t0 + 2 * BC
    r3 = t0 + 3 * BC
    m0 = t0 + o_i < t1
    m1 = r1 + o_i < t1
    m2 = r2 + o_i < t1
    m3 = r3 + o_i < t1

    z = tl.zeros([BC, BC], dtype=tl.float32)
    a10, a20, a21, a30, a31, a32 = z, z, z, z, z, z  # Akk
    p10, p20, p21, p30, p31, p32 = z, z, z, z, z, z  # Aqk
    for c0 in range(0, BK, BKC):
        # every load first, no branch around any (blocks past the chunk end load as 0): one wave of
        # memory latency per step instead of one per block
        k0 = load_tile(k, t0, t1, H, i_h, K, c0, BC, BKC)
        k1 = load_tile(k, r1, t1, H, i_h, K, c0, BC, BKC)
        k2 = load_tile(k, r2, t1, H, i_h, K, c0, BC, BKC)
        k3 = load_tile(k, r3, t1, H, i_h, K, c0, BC, BKC)
        q1 = load_tile(q, r1, t1, H, i_h, K, c0, BC, BKC)
        q2 = load_tile(q, r2, t1, H, i_h, K, c0, BC, BKC)
        q3 = load_tile(q, r3, t1, H, i_h, K, c0, BC, BKC)
        g0 = load_tile(G, t0, t1, H, i_h, K, c0, BC, BKC)
        g1 = load_tile(G, r1, t1, H, i_h, K, c0, BC, BKC)
        g2 = load_tile(G, r2, t1, H, i_h, K, c0, BC, BKC)
        g3 = load_tile(G, r3, t1, H, i_h, K, c0, BC, BKC)
        gr1 = _ref_row(G, r1, t1, H, i_h, K, c0, BKC)
        gr2 = _ref_row(G, r2, t1, H, i_h, K, c0, BKC)
        gr3 = _ref_row(G, r3, t1, H, i_h, K, c0, BKC)
        # rows i of block I through its first row r: e^{G_i - G_r} (rows past the end: exponent 0)
        e1 = tl.exp(tl.where(m1[:, None], g1 - gr1, 0.0))
        e2 = tl.exp(tl.where(m2[:, None], g2 - gr2, 0.0))
        e3 = tl.exp(tl.where(m3[:, None], g3 - gr3, 0.0))
        # columns j of block J < I: (k_j e^{G_r - G_j})^T
        kt = tl.trans(k0 * tl.exp(gr1 - g0))
        a10 = mm(k1 * e1, kt, a10, DOT_PREC)
        p10 = mm(q1 * e1, kt, p10, DOT_PREC)
        kt = tl.trans(k0 * tl.exp(gr2 - g0))
        a20 = mm(k2 * e2, kt, a20, DOT_PREC)
        p20 = mm(q2 * e2, kt, p20, DOT_PREC)
        kt = tl.trans(k1 * tl.exp(gr2 - g1))
        a21 = mm(k2 * e2, kt, a21, DOT_PREC)
        p21 = mm(q2 * e2, kt, p21, DOT_PREC)
        kt = tl.trans(k0 * tl.exp(gr3 - g0))
        a30 = mm(k3 * e3, kt, a30, DOT_PREC)
        p30 = mm(q3 * e3, kt, p30, DOT_PREC)
        kt = tl.trans(k1 * tl.exp(gr3 - g1))
        a31 = mm(k3 * e3, kt, a31, DOT_PREC)
        p31 = mm(q3 * e3, kt, p31, DOT_PREC)
        kt = tl.trans(k2 * tl.exp(gr3 - g2))
        a32 = mm(k3 * e3, kt, a32, DOT_PREC)
        p32 = mm(q3 * e3, kt, p32, DOT_PREC)

    # the sums were of raw q, k: the row and column norms (and beta, the scale) applied now
    ck0 = load_rows_vec(RK, t0 + o_i, m0, H, i_h)[None, :]  # 1/|k_j| along columns
    rk1 = load_rows_vec(RK, r1 + o_i, m1, H, i_h)
    rk2 = load_rows_vec(RK, r2 + o_i, m2, H, i_h)
    rk3 = load_rows_vec(RK, r3 + o_i, m3, H, i_h)
    ck1 = rk1[None, :]
    ck2 = rk2[None, :]
    rq1 = load_rows_vec(RQ, r1 + o_i, m1, H, i_h)[:, None]
    rq2 = load_rows_vec(RQ, r2 + o_i, m2, H, i_h)[:, None]
    rq3 = load_rows_vec(RQ, r3 + o_i, m3, H, i_h)[:, None]
    store_tile(Aqk, p10 * rq1 * ck0, r1, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Aqk, p20 * rq2 * ck0, r2, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Aqk, p21 * rq2 * ck1, r2, t1, H, i_h, BT, BC, BC, BC)
    store_tile(Aqk, p30 * rq3 * ck0, r3, t1, H, i_h, BT, 0, BC, BC)
    store_tile(Aqk, p31 * rq3 * ck1, r3, t1, H, i_h, BT, BC, BC, BC)
    store_tile(Aqk, p32 * rq3 * ck2, r3, t1, H, i_h, BT, 2 * BC, BC, BC)
    _zeros_above(Aqk, z, t0, t1, H, i_h, BT, BC)
    bk1 = (tl.sigmoid(load_rows_vec(beta_raw, r1 + o_i, m1, H, i_h)) * rk1)[:, None]  # beta_i / |k_i|
    bk2 = (tl.sigmoid(load_rows_vec(beta_raw, r2 + o_i, m2, H, i_h)) * rk2)[:, None]
    bk3 = (tl.sigmoid(load_rows_vec(beta_raw, r3 + o_i, m3, H, i_h)) * rk3)[:, None]
    a10 = a10 * bk1 * ck0
    a20 = a20 * bk2 * ck0
    a21 = a21 * bk2 * ck1
    a30 = a30 * bk3 * ck0
    a31 = a31 * bk3 * ck1
    a32 = a32 * bk3 * ck2

    # T = (I + Akk)^-1: the diagonal blocks by substitution, the others by block products
    t00, t11, t22, t33 = _inv_diag4(Akkd, t0, t1, H, i_h, BC)
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
    _zeros_above(Tinv, z, t0, t1, H, i_h, BT, BC)


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


# ----------------------------------------------------------------------------------------- 4
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
):
    """Per (chunk, head): W = T (beta k e^G), U = T (beta v) as whole-chunk products [BT, BT] x
    [BT, BKC], and the scan's Kd = k e^{G_last - G} and Qg = q e^G."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
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
        store_tile(Kd, b_k * tl.exp(tl.where(m_t[:, None], b_gl - b_g, 0.0)), t0, t1, H, i_h, K, c0, BT, BKC)
        b_g = tl.exp(b_g)
        store_tile(W, mm(b_t, b_k * b_g * b_beta, None, DOT_PREC), t0, t1, H, i_h, K, c0, BT, BKC)
        b_q = load_tile(q, t0, t1, H, i_h, K, c0, BT, BKC) * b_rq
        store_tile(Qg, b_q * b_g, t0, t1, H, i_h, K, c0, BT, BKC)
    for c0 in range(0, BV, BKC):
        b_v = load_tile(v, t0, t1, H, i_h, V, c0, BT, BKC) * b_beta
        store_tile(U, mm(b_t, b_v, None, DOT_PREC), t0, t1, H, i_h, V, c0, BT, BKC)


# ----------------------------------------------------------------------------------------- 5
@triton.jit
def _state_half(pool_row, has_init, o_k, o_v, K: tl.constexpr, V: tl.constexpr, STORAGE: tl.constexpr):
    """Rows o_k of the starting state (zeros for a new sequence), widened to fp32."""
    k_lim = tl.where(has_init, K, 0)
    return load_state(
        pool_row + o_k[:, None] * V + o_v[None, :], (o_k < k_lim)[:, None] & (o_v < V)[None, :], STORAGE
    )


@triton.jit(do_not_specialize=["sr_key"])
def scan_kernel(
    Kd,
    EGl,
    W,
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
):
    """The state as two row halves S1 = S[:BKH], S2 = S[BKH:2 BKH] (BKH >= K / 2): every product
    is split along K, so no operand tile is wider than BKH (fp32 operands of tf32x3 products at
    K = 128 spill registers otherwise)."""
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
        b_kd1 = load_tile_as_is(Kd, t0, t1, H, i_h, K, 0, BT, BKH)
        b_kd2 = load_tile_as_is(Kd, t0, t1, H, i_h, K, BKH, BT, BKH)
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
        b_s1 = b_s1 * b_el1[:, None] + mm(tl.trans(b_kd1), b_vn, None, DOT_PREC)
        b_s2 = b_s2 * b_el2[:, None] + mm(tl.trans(b_kd2), b_vn, None, DOT_PREC)
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


# ----------------------------------------------------------------------------------------- 6
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
):
    """o = Qg S_start + Aqk v_new per (chunk, head, V block): the scan without FUSE_OUT."""
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
