"""Triton SSD prefill in two launches, the walk kernel's algebra (`kernel.py`) with its sequential
part cut down to the state recurrence (as FLA's chunk kernels split `chunk_fwd_h` from
`chunk_fwd_o`):

1. `ssd_state_pass_kernel`, one program per (sequence, head, [BP, BN] block of the state), walks
   the sequence in blocks of BT tokens and does only the state update,
   S <- exp(c_last) S + (x * exp(c_last - c) dt)^T B, writing each block's incoming fp32 state to
   `h` [blocks, H, P, N] first; the format's store, the INTRA rounding at the end of every CHUNK
   and an empty sequence's store are the walk kernel's, element for element.
2. `ssd_output_kernel`, one program per (block of BT tokens, head, BP state rows), all in parallel:
   y = (C B^T * exp(c_l - c_s) [s <= l] * dt_s) x + exp(c_l) C S_in^T + D x with S_in read from `h`.

Every product has the walk kernel's operands, shapes and precision (3xTF32) and the state update
its order, so the two builds agree to the last bit wherever Triton lowers the same dot the same way
(tests check it under the interpreter); on an H100 they did not for the wrapper's tile
(`results/ssd-prefill-split/`), so choosing this variant is a numerics floor, not an equivalent.
The cost is `h`: one fp32 state per block of BT tokens per head (at NemotronH's dims, 32 KiB per
head and block)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import load_state, store_state
from .kernel import block_decay, block_output, round_intra


@triton.jit(do_not_specialize=["sr_key"])
def ssd_state_pass_kernel(
    x,
    dt_raw,
    b_in,
    a_log,
    dt_bias,
    pool,
    h,
    block_offsets,
    slots,
    positions,
    cu_seqlens,
    has_initial_state,
    sr_key,
    H: tl.constexpr,
    G: tl.constexpr,
    P: tl.constexpr,
    N: tl.constexpr,
    CHUNK: tl.constexpr,
    BT: tl.constexpr,
    BP: tl.constexpr,
    BN: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
    INTRA: tl.constexpr,
):
    i_n = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1)
    i_pn = tl.program_id(2)
    NB: tl.constexpr = (N + BN - 1) // BN
    i_p = i_pn // NB
    i_b = i_pn % NB
    i_g = i_h // (H // G)
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    blk0 = tl.load(block_offsets + i_n).to(tl.int64)

    o_p = i_p * BP + tl.arange(0, BP)
    o_n = i_b * BN + tl.arange(0, BN)
    o_t = tl.arange(0, BT)
    m_p = o_p < P
    m_n = o_n < N
    m_s = m_p[:, None] & m_n[None, :]
    o_s = o_p[:, None] * N + o_n[None, :]
    elem = i_h * P * N + o_s
    slot = tl.load(slots + i_n).to(tl.int64)
    pool_s = pool + (slot * H + i_h) * P * N + o_s
    init = tl.load(has_initial_state + i_n) != 0
    if ROUNDING == "sr":
        pos = tl.load(positions + i_n)
    else:
        pos = 0

    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_bias = tl.load(dt_bias + i_h).to(tl.float32)
    b_s = tl.where(init, load_state(pool_s, m_s, STORAGE), 0.0)
    if bos == eos:  # an empty sequence: its incoming state (zeros when new) through the format
        tl.store(pool_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)
    for c0 in range(bos, eos, BT):
        blk = blk0 + (c0 - bos) // BT
        tl.store(h + (blk * H + i_h) * P * N + o_s, b_s, mask=m_s)
        t = c0 + o_t
        m_t = t < eos
        b_dt, b_c, c_last = block_decay(dt_raw, t, m_t, i_h, b_a, b_bias, H, BT)
        m_tp = m_t[:, None] & m_p[None, :]
        b_x = tl.load(x + (t[:, None] * H + i_h) * P + o_p[None, :], mask=m_tp, other=0.0).to(tl.float32)
        b_xw = tl.trans(b_x * (tl.exp(c_last - b_c) * b_dt)[:, None])  # [BP, BT]
        m_tn = m_t[:, None] & m_n[None, :]
        b_B = tl.load(b_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(tl.float32)
        b_s = b_s * tl.exp(c_last) + tl.dot(b_xw, b_B, input_precision="tf32x3")
        if c0 + BT >= eos:
            tl.store(pool_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)
        elif (c0 + BT - bos) % CHUNK == 0:
            b_s = round_intra(b_s, INTRA)


@triton.jit
def ssd_output_kernel(
    x,
    dt_raw,
    b_in,
    c_in,
    a_log,
    dt_bias,
    d_skip,
    h,
    block_starts,
    block_ends,
    y,
    H: tl.constexpr,
    G: tl.constexpr,
    P: tl.constexpr,
    N: tl.constexpr,
    BT: tl.constexpr,
    BP: tl.constexpr,
    BN: tl.constexpr,
):
    i_blk = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1)
    i_p = tl.program_id(2)
    i_g = i_h // (H // G)
    c0 = tl.load(block_starts + i_blk).to(tl.int64)
    eos = tl.load(block_ends + i_blk).to(tl.int64)

    o_p = i_p * BP + tl.arange(0, BP)
    o_t = tl.arange(0, BT)
    m_p = o_p < P
    t = c0 + o_t
    m_t = t < eos
    m_tp = m_t[:, None] & m_p[None, :]
    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_bias = tl.load(dt_bias + i_h).to(tl.float32)
    b_d = tl.load(d_skip + i_h).to(tl.float32)
    b_dt, b_c, c_last = block_decay(dt_raw, t, m_t, i_h, b_a, b_bias, H, BT)
    b_x = tl.load(x + (t[:, None] * H + i_h) * P + o_p[None, :], mask=m_tp, other=0.0).to(tl.float32)
    h_blk = h + (i_blk * H + i_h) * P * N

    b_cb = tl.zeros([BT, BT], dtype=tl.float32)  # C B^T, summed over N blocks
    b_cs = tl.zeros([BT, BP], dtype=tl.float32)  # C S^T with the block's incoming state
    for n0 in range(0, N, BN):
        o_n = n0 + tl.arange(0, BN)
        m_n = o_n < N
        m_tn = m_t[:, None] & m_n[None, :]
        m_s = m_p[:, None] & m_n[None, :]
        b_B = tl.load(b_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(tl.float32)
        b_C = tl.load(c_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(tl.float32)
        b_s = tl.load(h_blk + o_p[:, None] * N + o_n[None, :], mask=m_s, other=0.0)
        b_cb = tl.dot(b_C, tl.trans(b_B), b_cb, input_precision="tf32x3")
        b_cs = tl.dot(b_C, tl.trans(b_s), b_cs, input_precision="tf32x3")

    b_y = block_output(b_cb, b_cs, b_c, b_dt, b_x, b_d, BT)
    tl.store(y + (t[:, None] * H + i_h) * P + o_p[None, :], b_y.to(y.dtype.element_ty), mask=m_tp)
