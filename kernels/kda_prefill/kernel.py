"""Triton chunked KDA prefill (chunk BT = 64, sub-blocks BC = 16), in five launches:

1. `gate_cumsum_kernel`   per (chunk, head): g = gate(g_raw), G = within-chunk inclusive cumsum of g.
2. `intra_kernel`         per (chunk, head, 16-row block): the chunk-local matrices
                           Akk[i, j] = beta_i * sum_c k_ic k_jc exp(G_ic - G_jc)   (j < i)
                           Aqk[i, j] =          sum_c q_ic k_jc exp(G_ic - G_jc)   (j <= i)
                          Off-diagonal 16-blocks use the first row r of the row block as reference,
                          exp(G_i - G_r) * exp(G_r - G_j), both factors <= 1: no overflow for any
                          gate (KDA's gate has no lower bound). Diagonal blocks are summed column by
                          column with the exact exp(G_i - G_j).
3. `solve_wy_kernel`      per (chunk, head): T = (I + Akk)^-1 by 16x16 forward substitution plus
                          block products, then the WY factors W = T (beta k e^G), U = T (beta v).
4. `state_pass_kernel`    per (sequence, head, V block), sequential over the sequence's chunks:
                          v_new = U - W S;  S <- e^{G_last} S + Kd^T v_new,  Kd = k e^{G_last - G}
                          (Kd, e^{G_last} and q e^G are precomputed by kernel 1: the sequential
                          kernel only streams W, U, Kd).
                          Stores each chunk's starting state (fp32) and v_new; the final state is
                          rounded once into the pool (its storage format: STORAGE, MANT_BITS,
                          ROUNDING; SR at the sequence position `positions[n]`). With INTRA_BF16
                          the carried state is rounded to bf16 at every chunk boundary.
5. `output_kernel`        per (chunk, head, V block): o = (q e^G) S_start + Aqk v_new (in
                          `stream.py`, which launches it too when its scan leaves the output out).

All matrices are fp32 and every tl.dot takes DOT_PREC ("tf32x3" by default: about fp32 accuracy
on tensor cores; "ieee" for exact fp32 FMA). Row tensors are [T, H, *] contiguous; the chunk
table maps a global chunk index to its first token and its end (exclusive, within its sequence).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import l2norm_rows, l2norm_vec, load_state, round_to_bf16_bits, store_state
from .gate import chunk_gate_cumsum
from .tiles import load_tile, store_tile


@triton.jit
def _load_row(base, t, t_end, H, i_h, D: tl.constexpr, BD: tl.constexpr):
    o_d = tl.arange(0, BD)
    lim = tl.where(t < t_end, D, 0)  # a scalar bool in the mask trips the CPU interpreter
    return tl.load(base + (t.to(tl.int64) * H + i_h) * D + o_d, mask=o_d < lim, other=0.0).to(tl.float32)


# ----------------------------------------------------------------------------------------- 1
@triton.jit
def gate_cumsum_kernel(
    q,
    k,
    g_raw,
    a_log,
    dt_bias,
    G,
    Qg,
    Kd,
    EGl,
    chunk_start,
    chunk_end,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
):
    """G = within-chunk cumsum of the gate, and the decay-weighted operands of the later kernels:
    Qg = q e^G (output), Kd = k e^(G_last - G) (state update), EGl = e^G_last (state decay)."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    b_g, b_glast = chunk_gate_cumsum(g_raw, a_log, dt_bias, G, EGl, i_c, t0, t1, H, i_h, K, 0, BT, BK)
    m_t = (t0 + tl.arange(0, BT) < t1)[:, None]
    b_q = l2norm_rows(load_tile(q, t0, t1, H, i_h, K, 0, BT, BK)) * scale
    store_tile(Qg, b_q * tl.exp(b_g), t0, t1, H, i_h, K, 0, BT, BK)
    b_k = l2norm_rows(load_tile(k, t0, t1, H, i_h, K, 0, BT, BK))
    store_tile(Kd, b_k * tl.exp(tl.where(m_t, b_glast[None, :] - b_g, 0.0)), t0, t1, H, i_h, K, 0, BT, BK)


# ----------------------------------------------------------------------------------------- 2
@triton.jit
def intra_kernel(
    q,
    k,
    G,
    beta_raw,
    Akk,
    Aqk,
    chunk_start,
    chunk_end,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_blk = tl.program_id(2)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)
    r0 = t0 + i_blk * BC  # first row of this block: the reference row
    if r0 < t1:
        o_i = tl.arange(0, BC)
        o_j = tl.arange(0, BT)
        m_i = (r0 + o_i) < t1

        b_qi = l2norm_rows(load_tile(q, r0, t1, H, i_h, K, 0, BC, BK)) * scale
        b_ki = l2norm_rows(load_tile(k, r0, t1, H, i_h, K, 0, BC, BK))
        b_gi = load_tile(G, r0, t1, H, i_h, K, 0, BC, BK)
        b_gr = _load_row(G, r0, t1, H, i_h, K, BK)
        b_beta = tl.sigmoid(
            tl.load(beta_raw + (r0 + o_i).to(tl.int64) * H + i_h, mask=m_i, other=0.0).to(tl.float32)
        )

        # off-diagonal blocks: columns j < r0, through the reference row r0
        b_kall = l2norm_rows(load_tile(k, t0, t1, H, i_h, K, 0, BT, BK))
        b_gall = load_tile(G, t0, t1, H, i_h, K, 0, BT, BK)
        m_off = (o_j < i_blk * BC)[:, None]
        b_kcol = tl.where(m_off, b_kall * tl.exp(tl.where(m_off, b_gr[None, :] - b_gall, 0.0)), 0.0)
        b_ei = tl.exp(tl.where(m_i[:, None], b_gi - b_gr[None, :], 0.0))
        b_aqk = tl.dot(b_qi * b_ei, tl.trans(b_kcol), input_precision=DOT_PREC)
        b_akk = tl.dot(b_ki * b_ei, tl.trans(b_kcol), input_precision=DOT_PREC)

        # diagonal block: exact exp(G_i - G_j), column by column
        for jj in range(0, BC):
            b_kj = l2norm_vec(_load_row(k, r0 + jj, t1, H, i_h, K, BK))
            b_gj = _load_row(G, r0 + jj, t1, H, i_h, K, BK)
            m_low = ((o_i >= jj) & m_i)[:, None]  # rows past the chunk end would overflow: skip them
            b_e = tl.exp(tl.where(m_low, b_gi - b_gj[None, :], float("-inf")))
            b_kje = b_kj[None, :] * b_e
            a_q = tl.sum(b_qi * b_kje, axis=1)
            a_k = tl.where(o_i > jj, tl.sum(b_ki * b_kje, axis=1), 0.0)
            sel = (o_j == i_blk * BC + jj)[None, :]
            b_aqk = tl.where(sel, a_q[:, None], b_aqk)
            b_akk = tl.where(sel, a_k[:, None], b_akk)

        b_akk = b_akk * b_beta[:, None]
        store_tile(Aqk, b_aqk, r0, t1, H, i_h, BT, 0, BC, BT)
        store_tile(Akk, b_akk, r0, t1, H, i_h, BT, 0, BC, BT)


# ----------------------------------------------------------------------------------------- 3
@triton.jit
def _akk_block(Akk, t0, t1, H, i_h, I: tl.constexpr, J: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """The [BC, BC] block (I, J) of the chunk's Akk (rows past the chunk end read as 0)."""
    return load_tile(Akk, t0 + I * BC, t1, H, i_h, BT, J * BC, BC, BC)


@triton.jit
def _inv_unit_lower(Akk, t0, t1, H, i_h, I: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """(I + A_II)^-1 for the strictly lower diagonal block II, by forward substitution on rows."""
    o_i = tl.arange(0, BC)
    b_t = tl.where(o_i[:, None] == o_i[None, :], 1.0, 0.0)
    for i in range(1, BC):
        row = t0 + I * BC + i
        lim = tl.where(row < t1, i, 0)
        b_a = tl.load(Akk + (row.to(tl.int64) * H + i_h) * BT + I * BC + o_i, mask=o_i < lim, other=0.0)
        b_new = tl.where(o_i == i, 1.0, 0.0) - tl.sum(b_a[:, None] * b_t, axis=0)
        b_t = tl.where((o_i == i)[:, None], b_new[None, :], b_t)
    return b_t


@triton.jit
def _wy_rows(
    b_t0,
    b_t1,
    b_t2,
    b_t3,
    NJ: tl.constexpr,
    k,
    v,
    G,
    beta_raw,
    W,
    U,
    t0,
    t1,
    H,
    i_h,
    I: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    """W rows of block I = sum_{J<=I} T_IJ (beta k e^G)_J and U rows = sum_J T_IJ (beta v)_J."""
    b_w = tl.zeros([BC, BK], dtype=tl.float32)
    b_u = tl.zeros([BC, BV], dtype=tl.float32)
    for J in tl.static_range(NJ):
        rJ = t0 + J * BC
        o_i = tl.arange(0, BC)
        b_beta = tl.sigmoid(
            tl.load(beta_raw + (rJ + o_i).to(tl.int64) * H + i_h, mask=(rJ + o_i) < t1, other=0.0).to(
                tl.float32
            )
        )
        b_x = l2norm_rows(load_tile(k, rJ, t1, H, i_h, K, 0, BC, BK))
        b_x = b_x * tl.exp(load_tile(G, rJ, t1, H, i_h, K, 0, BC, BK)) * b_beta[:, None]
        b_y = load_tile(v, rJ, t1, H, i_h, V, 0, BC, BV) * b_beta[:, None]
        if J == 0:
            b_tj = b_t0
        elif J == 1:
            b_tj = b_t1
        elif J == 2:
            b_tj = b_t2
        else:
            b_tj = b_t3
        b_w += tl.dot(b_tj, b_x, input_precision=DOT_PREC)
        b_u += tl.dot(b_tj, b_y, input_precision=DOT_PREC)
    store_tile(W, b_w, t0 + I * BC, t1, H, i_h, K, 0, BC, BK)
    store_tile(U, b_u, t0 + I * BC, t1, H, i_h, V, 0, BC, BV)


@triton.jit
def _wy_rows_if_present(
    b_t0,
    b_t1,
    b_t2,
    b_t3,
    NJ: tl.constexpr,
    k,
    v,
    G,
    beta_raw,
    W,
    U,
    t0,
    t1,
    H,
    i_h,
    I: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    """`_wy_rows` of row block I when the chunk reaches it (a sequence's last chunk may be short)."""
    if t0 + I * BC < t1:
        _wy_rows(
            b_t0,
            b_t1,
            b_t2,
            b_t3,
            NJ,
            k,
            v,
            G,
            beta_raw,
            W,
            U,
            t0,
            t1,
            H,
            i_h,
            I,
            K,
            V,
            BC,
            BK,
            BV,
            DOT_PREC,
        )


@triton.jit
def solve_wy_kernel(
    k,
    v,
    G,
    beta_raw,
    Akk,
    W,
    U,
    chunk_start,
    chunk_end,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    tl.static_assert(BT == 4 * BC, "the block solve is written for 4 sub-blocks per chunk")
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0 = tl.load(chunk_start + i_c)
    t1 = tl.load(chunk_end + i_c)

    # inverses of the diagonal blocks
    b_t00 = _inv_unit_lower(Akk, t0, t1, H, i_h, 0, BT, BC)
    b_t11 = _inv_unit_lower(Akk, t0, t1, H, i_h, 1, BT, BC)
    b_t22 = _inv_unit_lower(Akk, t0, t1, H, i_h, 2, BT, BC)
    b_t33 = _inv_unit_lower(Akk, t0, t1, H, i_h, 3, BT, BC)
    # off-diagonal blocks: T_IJ = -T_II sum_{J<=M<I} A_IM T_MJ
    b_a10 = _akk_block(Akk, t0, t1, H, i_h, 1, 0, BT, BC)
    b_a20 = _akk_block(Akk, t0, t1, H, i_h, 2, 0, BT, BC)
    b_a21 = _akk_block(Akk, t0, t1, H, i_h, 2, 1, BT, BC)
    b_a30 = _akk_block(Akk, t0, t1, H, i_h, 3, 0, BT, BC)
    b_a31 = _akk_block(Akk, t0, t1, H, i_h, 3, 1, BT, BC)
    b_a32 = _akk_block(Akk, t0, t1, H, i_h, 3, 2, BT, BC)
    b_t10 = -tl.dot(b_t11, tl.dot(b_a10, b_t00, input_precision=DOT_PREC), input_precision=DOT_PREC)
    b_t21 = -tl.dot(b_t22, tl.dot(b_a21, b_t11, input_precision=DOT_PREC), input_precision=DOT_PREC)
    b_t20 = -tl.dot(
        b_t22,
        tl.dot(b_a20, b_t00, input_precision=DOT_PREC) + tl.dot(b_a21, b_t10, input_precision=DOT_PREC),
        input_precision=DOT_PREC,
    )
    b_t32 = -tl.dot(b_t33, tl.dot(b_a32, b_t22, input_precision=DOT_PREC), input_precision=DOT_PREC)
    b_t31 = -tl.dot(
        b_t33,
        tl.dot(b_a31, b_t11, input_precision=DOT_PREC) + tl.dot(b_a32, b_t21, input_precision=DOT_PREC),
        input_precision=DOT_PREC,
    )
    b_t30 = -tl.dot(
        b_t33,
        tl.dot(b_a30, b_t00, input_precision=DOT_PREC)
        + tl.dot(b_a31, b_t10, input_precision=DOT_PREC)
        + tl.dot(b_a32, b_t20, input_precision=DOT_PREC),
        input_precision=DOT_PREC,
    )

    _wy_rows(
        b_t00, b_t00, b_t00, b_t00, 1, k, v, G, beta_raw, W, U, t0, t1, H, i_h, 0, K, V, BC, BK, BV, DOT_PREC
    )
    _wy_rows_if_present(
        b_t10, b_t11, b_t11, b_t11, 2, k, v, G, beta_raw, W, U, t0, t1, H, i_h, 1, K, V, BC, BK, BV, DOT_PREC
    )
    _wy_rows_if_present(
        b_t20, b_t21, b_t22, b_t22, 3, k, v, G, beta_raw, W, U, t0, t1, H, i_h, 2, K, V, BC, BK, BV, DOT_PREC
    )
    _wy_rows_if_present(
        b_t30, b_t31, b_t32, b_t33, 4, k, v, G, beta_raw, W, U, t0, t1, H, i_h, 3, K, V, BC, BK, BV, DOT_PREC
    )


# ----------------------------------------------------------------------------------------- 4
@triton.jit(do_not_specialize=["sr_key"])
def state_pass_kernel(
    Kd,
    EGl,
    W,
    U,
    Vn,
    Hs,
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
    BK: tl.constexpr,
    BV: tl.constexpr,
    BR: tl.constexpr,
    DOT_PREC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
    INTRA_BF16: tl.constexpr,
):
    i_nh = tl.program_id(0)  # N*H can exceed the 65535 limit of grid axes 1 and 2
    i_v = tl.program_id(1)
    i_n = i_nh // H
    i_h = i_nh % H
    bos = tl.load(cu_seqlens + i_n).to(tl.int32)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int32)
    c_first = tl.load(chunk_offsets + i_n).to(tl.int64)
    n_chunks = tl.cdiv(eos - bos, BT)

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_s = (o_k < K)[:, None] & (o_v < V)[None, :]
    o_s = o_k[:, None] * V + o_v[None, :]
    slot = tl.load(slots + i_n).to(tl.int64)
    p_pool = pool + (slot * H + i_h) * K * V + o_s
    k_lim = tl.where(tl.load(has_initial_state + i_n) != 0, K, 0)  # K rows, or none: start from zeros
    b_s = load_state(p_pool, (o_k < k_lim)[:, None] & (o_v < V)[None, :], STORAGE)

    for i_t in range(0, n_chunks):
        t0 = bos + i_t * BT
        t1 = tl.minimum(t0 + BT, eos)
        i_c = c_first + i_t
        tl.store(Hs + (i_c * H + i_h) * K * V + o_s, b_s, mask=m_s)
        # the chunk in blocks of BR rows, in a loop (not unrolled): keeps the live tiles small
        b_acc = tl.zeros([BK, BV], dtype=tl.float32)
        for r in range(0, BT, BR):
            b_w = load_tile(W, t0 + r, t1, H, i_h, K, 0, BR, BK)
            b_vn = _load_vblock(U, t0 + r, t1, H, i_h, i_v, V, BR, BV) - tl.dot(
                b_w, b_s, input_precision=DOT_PREC
            )
            _store_vblock(Vn, b_vn, t0 + r, t1, H, i_h, i_v, V, BR, BV)
            b_kd = load_tile(Kd, t0 + r, t1, H, i_h, K, 0, BR, BK)
            b_acc = tl.dot(tl.trans(b_kd), b_vn, b_acc, input_precision=DOT_PREC)
        b_el = tl.load(EGl + (i_c * H + i_h) * K + o_k, mask=o_k < K, other=0.0)
        b_s = b_s * b_el[:, None] + b_acc
        if INTRA_BF16:
            if i_t + 1 < n_chunks:
                b_s = round_to_bf16_bits(b_s, False).to(tl.float32)

    if ROUNDING == "sr":
        pos = tl.load(positions + i_n)
    else:
        pos = 0
    elem = i_h * K * V + o_s
    tl.store(p_pool, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)


@triton.jit
def _vblock(base, t0, t1, H, i_h, i_v, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr):
    o_r = t0 + tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    ptr = base + (o_r.to(tl.int64)[:, None] * H + i_h) * V + o_v[None, :]
    mask = (o_r < t1)[:, None] & (o_v < V)[None, :]
    return ptr, mask


@triton.jit
def _load_vblock(base, t0, t1, H, i_h, i_v, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr):
    ptr, mask = _vblock(base, t0, t1, H, i_h, i_v, V, BT, BV)
    return tl.load(ptr, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store_vblock(base, x, t0, t1, H, i_h, i_v, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr):
    ptr, mask = _vblock(base, t0, t1, H, i_h, i_v, V, BT, BV)
    tl.store(ptr, x.to(base.dtype.element_ty), mask=mask)
