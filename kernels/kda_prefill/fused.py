"""The chunk-local part of the prefill (split path's `intra_kernel` + `solve_wy_kernel`) in one launch.

Why: the split path writes the fp32 Akk to HBM and reads it back row by row in the solve, and each
of its programs works on one 16-row block; at T=32k the two launches took ~15 ms, 11-23x their
memory floor. Here one program per (chunk, head) walks the chunk's four 16-row blocks I in order:

  Aqk_I, Akk_I   the same math as `intra_kernel`: off-diagonal columns (j < 16I) through the block's
                 first row r, exp(G_i - G_r) * exp(G_r - G_j) (both <= 1, so no overflow for any
                 gate), one [16, BK] x [BK, 64] tensor-core dot each; the diagonal 16x16 block with
                 the exact exp(G_i - G_j), column by column; Akk rows times beta_i.
  T_II           (I + A_II)^-1 by forward substitution on the register tile (as `_inv_unit_lower`).
  W_I, U_I       block forward substitution, the rows of W = (I + Akk)^-1 (beta k e^G) directly:
                 W_I = T_II (X_I - A_I,<I W_<I), with the earlier blocks' W rows read back from the
                 output buffer ([64, BK] tile, rows < 16I; a barrier orders the store and the read,
                 the data stays in L1/L2). Same for U with beta v.

Akk never leaves the program. The result equals the split path's to fp32 rounding (the solve is
the same algebra ordered differently: substitution on W instead of forming T, then T X)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import l2norm_vec
from .kernel import _load_row, _load_rows, _store_rows


@triton.jit
def _tile(base, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    """Pointers and mask for rows t0..t0+BR-1 (< t_end), columns c0..c0+BD-1 (< D) of a [T, H, D] tensor."""
    o_r = t0 + tl.arange(0, BR)
    o_d = c0 + tl.arange(0, BD)
    ptr = base + (o_r.to(tl.int64)[:, None] * H + i_h) * D + o_d[None, :]
    mask = (o_r < t_end)[:, None] & (o_d < D)[None, :]
    return ptr, mask


@triton.jit
def _load_tile(base, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    ptr, mask = _tile(base, t0, t_end, H, i_h, D, c0, BR, BD)
    return tl.load(ptr, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store_tile(base, x, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    ptr, mask = _tile(base, t0, t_end, H, i_h, D, c0, BR, BD)
    tl.store(ptr, x.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _row_norm(x):
    """sqrt(sum x^2 + 1e-6) per row: `l2norm_rows(x) == x / _row_norm(x)[:, None]`."""
    return tl.sqrt(tl.sum(x * x, axis=1) + 1e-6)


@triton.jit
def _block_row(
    q,
    k,
    v,
    G,
    beta_raw,
    Aqk,
    W,
    U,
    t0,
    t1,
    scale,
    i_h,
    b_nk_all,
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
    """Rows 16I..16I+15 of the chunk: Aqk stored, W and U solved and stored. The dots run over K
    (and V) in column blocks of BKC: full [64, 128] fp32 operands spill at K = 128.
    `b_nk_all`: the row norms of the chunk's k (for the off-diagonal columns)."""
    r0 = t0 + I * BC  # first row of the block: the reference row
    o_i = tl.arange(0, BC)
    o_j = tl.arange(0, BT)
    m_i = (r0 + o_i) < t1
    b_beta = tl.sigmoid(
        tl.load(beta_raw + (r0 + o_i).to(tl.int64) * H + i_h, mask=m_i, other=0.0).to(tl.float32)
    )

    # diagonal block: exact exp(G_i - G_j), column by column (full-width rows); Akk's block as a
    # [BC, BC] tile, Aqk's into its [BC, BT] row panel (other columns 0 here)
    b_qi = _load_rows(q, r0, t1, H, i_h, K, BC, BK)
    b_nq = _row_norm(b_qi)
    b_qi = b_qi / b_nq[:, None] * scale
    b_ki = _load_rows(k, r0, t1, H, i_h, K, BC, BK)
    b_nk = _row_norm(b_ki)
    b_ki = b_ki / b_nk[:, None]
    b_gi = _load_rows(G, r0, t1, H, i_h, K, BC, BK)
    o_c = tl.arange(0, BC)
    b_aqk = tl.zeros([BC, BT], dtype=tl.float32)
    b_ad = tl.zeros([BC, BC], dtype=tl.float32)
    for jj in range(0, BC):
        b_kj = l2norm_vec(_load_row(k, r0 + jj, t1, H, i_h, K, BK))
        b_gj = _load_row(G, r0 + jj, t1, H, i_h, K, BK)
        m_low = ((o_i >= jj) & m_i)[:, None]  # rows past the chunk end would overflow: skip them
        b_e = tl.exp(tl.where(m_low, b_gi - b_gj[None, :], float("-inf")))
        b_kje = b_kj[None, :] * b_e
        a_q = tl.sum(b_qi * b_kje, axis=1)
        a_k = tl.where(o_i > jj, tl.sum(b_ki * b_kje, axis=1), 0.0)
        b_aqk = tl.where((o_j == I * BC + jj)[None, :], a_q[:, None], b_aqk)
        b_ad = tl.where((o_c == jj)[None, :], a_k[:, None], b_ad)
    b_ad = b_ad * b_beta[:, None]

    # off-diagonal columns j < r0 (none in block 0), through the reference row r0:
    # exp(G_i - G_r) * exp(G_r - G_j), both factors <= 1; differences outside their range masked to 0
    b_aoff = tl.zeros([BC, BT], dtype=tl.float32)
    if I > 0:
        m_off = (o_j < I * BC)[:, None]
        for c0 in range(0, BK, BKC):
            o_k = c0 + tl.arange(0, BKC)
            b_gr = tl.load(G + (r0.to(tl.int64) * H + i_h) * K + o_k, mask=o_k < K, other=0.0)
            b_kc = _load_tile(k, t0, t1, H, i_h, K, c0, BT, BKC) / b_nk_all[:, None]
            b_gc = _load_tile(G, t0, t1, H, i_h, K, c0, BT, BKC)
            b_kcol = tl.where(m_off, b_kc * tl.exp(tl.where(m_off, b_gr[None, :] - b_gc, 0.0)), 0.0)
            b_g = _load_tile(G, r0, t1, H, i_h, K, c0, BC, BKC)
            b_ei = tl.exp(tl.where(m_i[:, None], b_g - b_gr[None, :], 0.0))
            b_q = _load_tile(q, r0, t1, H, i_h, K, c0, BC, BKC) / b_nq[:, None] * scale
            b_k = _load_tile(k, r0, t1, H, i_h, K, c0, BC, BKC) / b_nk[:, None]
            b_aqk = tl.dot(b_q * b_ei, tl.trans(b_kcol), b_aqk, input_precision=DOT_PREC)
            b_aoff = tl.dot(b_k * b_ei, tl.trans(b_kcol), b_aoff, input_precision=DOT_PREC)
        b_aoff = b_aoff * b_beta[:, None]
    _store_rows(Aqk, b_aqk, r0, t1, H, i_h, BT, BC, BT)

    # T_II = (I + A_II)^-1, forward substitution on rows (rows past the chunk end are zero in A_II)
    b_t = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    for i in range(1, BC):
        b_a = tl.sum(tl.where((o_c == i)[:, None], b_ad, 0.0), axis=0)  # row i of A_II (cols < i)
        b_new = tl.where(o_c == i, 1.0, 0.0) - tl.sum(b_a[:, None] * b_t, axis=0)
        b_t = tl.where((o_c == i)[:, None], b_new[None, :], b_t)

    # W_I = T_II (beta k e^G - A_I,<I W_<I), U_I = T_II (beta v - A_I,<I U_<I); the earlier blocks'
    # rows (< r0) come back from W and U (rows >= r0 masked to 0: A_I,>=I is 0 there anyway)
    for c0 in range(0, BK, BKC):
        b_x = _load_tile(k, r0, t1, H, i_h, K, c0, BC, BKC) / b_nk[:, None]
        b_x = b_x * tl.exp(_load_tile(G, r0, t1, H, i_h, K, c0, BC, BKC)) * b_beta[:, None]
        if I > 0:
            b_x -= tl.dot(b_aoff, _load_tile(W, t0, r0, H, i_h, K, c0, BT, BKC), input_precision=DOT_PREC)
        _store_tile(W, tl.dot(b_t, b_x, input_precision=DOT_PREC), r0, t1, H, i_h, K, c0, BC, BKC)
    for c0 in range(0, BV, BKC):
        b_y = _load_tile(v, r0, t1, H, i_h, V, c0, BC, BKC) * b_beta[:, None]
        if I > 0:
            b_y -= tl.dot(b_aoff, _load_tile(U, t0, r0, H, i_h, V, c0, BT, BKC), input_precision=DOT_PREC)
        _store_tile(U, tl.dot(b_t, b_y, input_precision=DOT_PREC), r0, t1, H, i_h, V, c0, BC, BKC)


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
    DOT_PREC: tl.constexpr,
):
    """Per (chunk, head): Aqk, W, U of the chunk (inputs as `intra_kernel` + `solve_wy_kernel`)."""
    tl.static_assert(BT == 4 * BC, "written for 4 sub-blocks per chunk")
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    b_ss = tl.zeros([BT], dtype=tl.float32)  # row norms of the chunk's k, summed over column blocks
    for c0 in range(0, BK, BKC):
        b_kc = _load_tile(k, t0, t1, H, i_h, K, c0, BT, BKC)
        b_ss += tl.sum(b_kc * b_kc, axis=1)
    b_nk_all = tl.sqrt(b_ss + 1e-6)
    _block_row(
        q,
        k,
        v,
        G,
        beta_raw,
        Aqk,
        W,
        U,
        t0,
        t1,
        scale,
        i_h,
        b_nk_all,
        H,
        0,
        K,
        V,
        BT,
        BC,
        BK,
        BV,
        BKC,
        DOT_PREC,
    )
    # each block reads the W/U rows the blocks before it stored (other threads of this program)
    if t0 + BC < t1:
        tl.debug_barrier()
        _block_row(
            q,
            k,
            v,
            G,
            beta_raw,
            Aqk,
            W,
            U,
            t0,
            t1,
            scale,
            i_h,
            b_nk_all,
            H,
            1,
            K,
            V,
            BT,
            BC,
            BK,
            BV,
            BKC,
            DOT_PREC,
        )
    if t0 + 2 * BC < t1:
        tl.debug_barrier()
        _block_row(
            q,
            k,
            v,
            G,
            beta_raw,
            Aqk,
            W,
            U,
            t0,
            t1,
            scale,
            i_h,
            b_nk_all,
            H,
            2,
            K,
            V,
            BT,
            BC,
            BK,
            BV,
            BKC,
            DOT_PREC,
        )
    if t0 + 3 * BC < t1:
        tl.debug_barrier()
        _block_row(
            q,
            k,
            v,
            G,
            beta_raw,
            Aqk,
            W,
            U,
            t0,
            t1,
            scale,
            i_h,
            b_nk_all,
            H,
            3,
            K,
            V,
            BT,
            BC,
            BK,
            BV,
            BKC,
            DOT_PREC,
        )
