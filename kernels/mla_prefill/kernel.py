"""Triton flash-attention forward of the MLA prefill (see the package docstring).

One program per (block of BLOCK_M queries, head). Query i is at absolute position L - m + i and
sees keys 0..L - m + i (lower-right causal alignment). The program streams the keys in blocks of
BLOCK_N from key 0 with an online softmax in fp32 (exp2 of log2-scaled scores):
1. the blocks every query of the tile sees in full (keys <= L - m + first row): no mask at all;
2. the blocks across the diagonal (up to the tile's last position): the causal mask;
blocks after the tile's last position are never visited. Every row adds its key blocks (from key 0,
in steps of BLOCK_N) in one order whatever the grid or the batch: the result depends on the
sequence's own q, k, v and shapes only (no atomics, no split-K).

The query/key head dim D is cut into NC <= 4 chunks of DC columns (a power of two; the last one
masked if D is not a multiple): 192 = 3 x 64, so Kimi-Linear's scores cost no padded columns, and
the narrow chunks keep the fp32 build (whose tf32x3 split doubles every operand) within the
registers. The value head dim DV is padded to BLOCK_DV with masked loads (128 needs none). MASK_D /
MASK_DV say whether any column mask is needed: the exact shapes load without masks on the head dim.

Dots take the inputs' dtype: 16-bit q/k/v multiply on tensor cores with fp32 accumulation and P is
cast to v's dtype for the PV dot (as flash-attention does); fp32 inputs use DOT_PREC ("tf32x3":
three tf32 products, about fp32 accuracy; "ieee": exact fp32 FMA)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _load_tile(ptrs, rows_ok, cols, N_COLS: tl.constexpr, MASK_ROWS: tl.constexpr, MASK_COLS: tl.constexpr):
    """A [rows, cols] tile; masked lanes (rows not ok, columns >= N_COLS) read 0. The masks are
    built only where the constexprs say a lane can fall outside."""
    if MASK_ROWS and MASK_COLS:
        x = tl.load(ptrs, mask=rows_ok[:, None] & (cols < N_COLS)[None, :], other=0.0)
    elif MASK_ROWS:
        x = tl.load(ptrs, mask=rows_ok[:, None], other=0.0)
    elif MASK_COLS:
        x = tl.load(ptrs, mask=(cols < N_COLS)[None, :], other=0.0)
    else:
        x = tl.load(ptrs)
    return x


@triton.jit
def _dot(a, b, acc, DOT_PREC: tl.constexpr, WIDEN: tl.constexpr):
    """a @ b (+ acc) in fp32. WIDEN (set only under Triton's CPU interpreter, whose dot multiplies
    bf16 tiles as raw integers: numpy has no bf16) widens the operands to fp32 first, which is exact
    for bf16 values, like the tensor cores' products."""
    if WIDEN:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        c = tl.dot(a, b, acc, input_precision=DOT_PREC)
    return c


@triton.jit
def _scores_chunk(
    s, q_c, k_rows, keys_ok,
    C: tl.constexpr, D: tl.constexpr, DC: tl.constexpr, MASK_KEYS: tl.constexpr, MASK_D: tl.constexpr,
    DOT_PREC: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """s + q_c @ k_c^T for head-dim chunk C (columns C*DC .. C*DC + DC - 1) of the key block whose
    row pointers are k_rows [BLOCK_N, 1]."""
    cols = C * DC + tl.arange(0, DC)
    k_c = _load_tile(k_rows + cols[None, :], keys_ok, cols, D, MASK_KEYS, MASK_D)
    return _dot(q_c, tl.trans(k_c), s, DOT_PREC, WIDEN)


@triton.jit
def _attend_key_blocks(
    acc, m_i, l_i, q0, q1, q2, q3, q_pos,
    k_block, v_block, stride_kt, stride_vt, key_lo, key_hi, L, qk_scale_log2,
    D: tl.constexpr, DC: tl.constexpr, NC: tl.constexpr, DV: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK_D: tl.constexpr, MASK_DV: tl.constexpr,
    CAUSAL: tl.constexpr, DOT_PREC: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """Online softmax over the key blocks from key_lo (a multiple of BLOCK_N; k_block and v_block
    point at its row) up to key_hi. CAUSAL: mask keys after each query's position (and, in loads,
    keys >= L). The block pointers advance in 64-bit pointer arithmetic; tile offsets stay small."""
    offs_n = tl.arange(0, BLOCK_N)
    dv = tl.arange(0, BLOCK_DV)
    k_off = offs_n[:, None] * stride_kt
    v_off = offs_n[:, None] * stride_vt + dv[None, :]
    for start_n in range(key_lo, key_hi, BLOCK_N):
        keys_ok = (start_n + offs_n) < L
        k_rows = k_block + k_off
        s = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        s = _scores_chunk(s, q0, k_rows, keys_ok, 0, D, DC, CAUSAL, MASK_D, DOT_PREC, WIDEN)
        if NC > 1:
            s = _scores_chunk(s, q1, k_rows, keys_ok, 1, D, DC, CAUSAL, MASK_D, DOT_PREC, WIDEN)
        if NC > 2:
            s = _scores_chunk(s, q2, k_rows, keys_ok, 2, D, DC, CAUSAL, MASK_D, DOT_PREC, WIDEN)
        if NC > 3:
            s = _scores_chunk(s, q3, k_rows, keys_ok, 3, D, DC, CAUSAL, MASK_D, DOT_PREC, WIDEN)
        s = s * qk_scale_log2
        if CAUSAL:
            s = tl.where((start_n + offs_n)[None, :] <= q_pos[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_tile(v_block + v_off, keys_ok, dv, DV, CAUSAL, MASK_DV)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], DOT_PREC, WIDEN)
        m_i = m_new
        k_block += BLOCK_N * stride_kt
        v_block += BLOCK_N * stride_vt
    return acc, m_i, l_i


@triton.jit
def _load_q_chunk(q_tile, offs_m, stride_qt, rows_ok, C: tl.constexpr, D: tl.constexpr, DC: tl.constexpr,
                  MASK_D: tl.constexpr):  # fmt: skip
    cols = C * DC + tl.arange(0, DC)
    return _load_tile(q_tile + offs_m[:, None] * stride_qt + cols[None, :], rows_ok, cols, D, True, MASK_D)


@triton.jit
def mla_prefill_kernel(
    Q, K, V, O,
    qk_scale_log2, m, L,
    stride_qh, stride_qt, stride_kh, stride_kt, stride_vh, stride_vt, stride_oh, stride_ot,
    D: tl.constexpr, DC: tl.constexpr, NC: tl.constexpr, DV: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK_D: tl.constexpr, MASK_DV: tl.constexpr,
    DOT_PREC: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    # The last query tiles see the most keys: start them first (the grid's tail is then short work).
    tile = tl.num_programs(0) - 1 - tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    first = tile * BLOCK_M
    offs_m = tl.arange(0, BLOCK_M)
    rows_ok = (first + offs_m) < m
    q_pos = L - m + first + offs_m  # absolute positions of the tile's queries
    q_tile = Q + h * stride_qh + first.to(tl.int64) * stride_qt
    # the query tile in NC head-dim chunks of DC columns (unused chunks alias chunk 0)
    q0 = _load_q_chunk(q_tile, offs_m, stride_qt, rows_ok, 0, D, DC, MASK_D)
    q1 = q0
    q2 = q0
    q3 = q0
    if NC > 1:
        q1 = _load_q_chunk(q_tile, offs_m, stride_qt, rows_ok, 1, D, DC, MASK_D)
    if NC > 2:
        q2 = _load_q_chunk(q_tile, offs_m, stride_qt, rows_ok, 2, D, DC, MASK_D)
    if NC > 3:
        q3 = _load_q_chunk(q_tile, offs_m, stride_qt, rows_ok, 3, D, DC, MASK_D)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    K_head = K + h * stride_kh
    V_head = V + h * stride_vh
    # keys 0..full_hi-1: whole blocks that every query of the tile sees (key <= L - m + first)
    full_hi = (L - m + first + 1) // BLOCK_N * BLOCK_N
    # keys up to the tile's last position (or L - 1)
    diag_hi = tl.minimum(L, L - m + first + BLOCK_M)
    acc, m_i, l_i = _attend_key_blocks(
        acc, m_i, l_i, q0, q1, q2, q3, q_pos, K_head, V_head, stride_kt, stride_vt, 0, full_hi, L,
        qk_scale_log2, D, DC, NC, DV, BLOCK_DV, BLOCK_M, BLOCK_N, MASK_D, MASK_DV, False, DOT_PREC, WIDEN,
    )  # fmt: skip
    acc, m_i, l_i = _attend_key_blocks(
        acc, m_i, l_i, q0, q1, q2, q3, q_pos, K_head + full_hi.to(tl.int64) * stride_kt,
        V_head + full_hi.to(tl.int64) * stride_vt, stride_kt, stride_vt, full_hi, diag_hi, L,
        qk_scale_log2, D, DC, NC, DV, BLOCK_DV, BLOCK_M, BLOCK_N, MASK_D, MASK_DV, True, DOT_PREC, WIDEN,
    )  # fmt: skip

    # every valid row saw key 0 at least, so l_i >= 1 there; rows past m are not stored
    o = acc / l_i[:, None]
    dv = tl.arange(0, BLOCK_DV)
    o_ptrs = O + h * stride_oh + first.to(tl.int64) * stride_ot + offs_m[:, None] * stride_ot + dv[None, :]
    if MASK_DV:
        tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=rows_ok[:, None] & (dv < DV)[None, :])
    else:
        tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=rows_ok[:, None])
