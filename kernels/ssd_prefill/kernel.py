"""Triton SSD prefill: one program per (sequence, head, block of BP state rows), walking the
sequence in blocks of BT tokens with the chunk algebra of transformers' `mamba2_chunk_scan`
(mamba2.md §3; `ssd_prefill/cpu.py` is the same algebra in torch):

    c = cumsum(dt A) within the block,
    y = (C B^T * exp(c_l - c_s) [s <= l] * dt_s) x + exp(c_l) C S^T + D x,
    S <- exp(c_last) S + (x * exp(c_last - c) dt)^T B.

Inside a block the state's N axis is walked BN columns at a time, so only [BT, BN] slices of B
and C and a [BP, BN] slice of the state are live (the whole [BT, N] B, C and [BP, N] state spilled
~1.4 KB per thread at NemotronH's dims on sm_90); C B^T and C S^T sum over the N blocks in the
dots' accumulators, in the same order in every format's build. Between blocks the fp32 state lives
in `work` (one [H, P, N] fp32 state per sequence: less than the per-chunk states transformers'
chunked scan keeps); it is read from the pool (widened) at the first block and stored once, at the
sequence's end, in the pool's format (`triton_common.store_state`; SR hashes the launch key, the
store's position and the element's index in [H, P, N]). INTRA ("fp16" | "bf16") also rounds the
carried state at the end of every CHUNK tokens (a multiple of BT) but the sequence's last, as the
KDA prefill's intra-chunk dtype. Tokens past the sequence's end are masked to dt = 0 and x = 0: no
decay and no increment, so they change nothing. The products run as 3xTF32 (`input_precision`
"tf32x3", fp32-accurate on tensor cores, as the KDA prefill's fp32 form; plain tf32 would change
the state math, and "ieee" dots run on FMA units and spilled ~7.6 KB per thread). The fp32 twin of
a rounding build loads the same widened state and runs the same products; only the final store
differs."""

from __future__ import annotations

import triton
import triton.language as tl

from ..ssd_decode.kernel import softplus
from ..triton_common import load_state, round_to, store_state


@triton.jit
def block_decay(dt_raw, t, m_t, i_h, b_a, b_bias, H: tl.constexpr, BT: tl.constexpr):
    """A block's dt (masked to 0 past the sequence), its within-block cumulative decay c = cumsum(dt A)
    and c at the block's last token."""
    o_t = tl.arange(0, BT)
    b_dr = tl.load(dt_raw + t * H + i_h, mask=m_t, other=0.0).to(tl.float32)
    b_dt = tl.where(m_t, softplus(b_dr + b_bias), 0.0)
    b_c = tl.cumsum(b_dt * b_a, axis=0)
    c_last = tl.sum(tl.where(o_t == BT - 1, b_c, 0.0), axis=0)
    return b_dt, b_c, c_last


@triton.jit
def round_intra(b_s, INTRA: tl.constexpr):
    """The carried fp32 state rounded to nearest INTRA ("fp16" | "bf16"; "" keeps it) and widened."""
    if INTRA == "bf16":  # bit arithmetic: the interpreter's own conversion truncates
        b_s = round_to(b_s, tl.bfloat16).to(tl.float32)
    elif INTRA == "fp16":
        b_s = round_to(b_s, tl.float16).to(tl.float32)
    return b_s


@triton.jit
def block_output(b_cb, b_cs, b_c, b_dt, b_x, b_d, BT: tl.constexpr):
    """A block's y = (C B^T * exp(c_l - c_s) [s <= l] * dt_s) x + exp(c_l) C S_in^T + D x, from C B^T
    and C S_in^T summed over N."""
    o_t = tl.arange(0, BT)
    causal = o_t[:, None] >= o_t[None, :]
    decay = tl.exp(tl.where(causal, b_c[:, None] - b_c[None, :], -float("inf")))
    b_y = tl.dot(b_cb * decay * b_dt[None, :], b_x, input_precision="tf32x3")
    b_y += tl.exp(b_c)[:, None] * b_cs
    b_y += b_d * b_x
    return b_y


@triton.jit
def _state_in(pool_p, work_p, mask, init, first, STORAGE: tl.constexpr):
    """A [BP, BN] state block: the pool's (widened; zeros for a new sequence) at the first chunk,
    the fp32 working copy after."""
    if first:
        b_s = tl.where(init, load_state(pool_p, mask, STORAGE), 0.0)
    else:
        b_s = tl.load(work_p, mask=mask, other=0.0)
    return b_s


@triton.jit
def _state_out(b_s, pool_p, work_p, mask, final, chunk_end, elem, pos, sr_key, STORAGE: tl.constexpr,
               MANT_BITS: tl.constexpr, ROUNDING: tl.constexpr, INTRA: tl.constexpr):  # fmt: skip
    """A state block after a block of tokens: to the pool in its format after the sequence's last,
    else to the fp32 working copy (rounded to nearest INTRA first at the end of a CHUNK)."""
    if final:
        tl.store(pool_p, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=mask)
    else:
        if chunk_end:
            b_s = round_intra(b_s, INTRA)
        tl.store(work_p, b_s, mask=mask)


@triton.jit
def _store_incoming(pool_h, o_p, init, i_h, pos, sr_key, P: tl.constexpr, N: tl.constexpr, BN: tl.constexpr,
                    STORAGE: tl.constexpr, MANT_BITS: tl.constexpr, ROUNDING: tl.constexpr):  # fmt: skip
    """An empty sequence's state: its incoming one (zeros when new) stored through the format."""
    for n0 in range(0, N, BN):
        o_n = n0 + tl.arange(0, BN)
        o_s = o_p[:, None] * N + o_n[None, :]
        m_s = (o_p < P)[:, None] & (o_n < N)[None, :]
        b_s = tl.where(init, load_state(pool_h + o_s, m_s, STORAGE), 0.0)
        elem = i_h * P * N + o_s
        tl.store(pool_h + o_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)


@triton.jit(do_not_specialize=["sr_key"])
def ssd_prefill_kernel(
    x,
    dt_raw,
    b_in,
    c_in,
    a_log,
    dt_bias,
    d_skip,
    pool,
    work,
    slots,
    positions,
    cu_seqlens,
    has_initial_state,
    y,
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
    i_p = tl.program_id(2)
    i_g = i_h // (H // G)
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)

    o_p = i_p * BP + tl.arange(0, BP)
    o_t = tl.arange(0, BT)
    m_p = o_p < P
    slot = tl.load(slots + i_n).to(tl.int64)
    pool_h = pool + (slot * H + i_h) * P * N
    work_h = work + (i_n * H + i_h) * P * N
    init = tl.load(has_initial_state + i_n) != 0
    if ROUNDING == "sr":
        pos = tl.load(positions + i_n)
    else:
        pos = 0

    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_bias = tl.load(dt_bias + i_h).to(tl.float32)
    b_d = tl.load(d_skip + i_h).to(tl.float32)
    for c0 in range(bos, eos, BT):
        t = c0 + o_t
        m_t = t < eos
        m_tp = m_t[:, None] & m_p[None, :]
        b_x = tl.load(x + (t[:, None] * H + i_h) * P + o_p[None, :], mask=m_tp, other=0.0).to(tl.float32)
        b_dt, b_c, c_last = block_decay(dt_raw, t, m_t, i_h, b_a, b_bias, H, BT)
        b_xw = tl.trans(b_x * (tl.exp(c_last - b_c) * b_dt)[:, None])  # [BP, BT]

        b_cb = tl.zeros([BT, BT], dtype=tl.float32)  # C B^T, summed over N blocks
        b_cs = tl.zeros([BT, BP], dtype=tl.float32)  # C S^T with the chunk's incoming state
        for n0 in range(0, N, BN):
            o_n = n0 + tl.arange(0, BN)
            m_n = o_n < N
            m_tn = m_t[:, None] & m_n[None, :]
            m_s = m_p[:, None] & m_n[None, :]
            b_B = tl.load(b_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(
                tl.float32
            )
            b_C = tl.load(c_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(
                tl.float32
            )
            o_s = o_p[:, None] * N + o_n[None, :]
            b_s = _state_in(pool_h + o_s, work_h + o_s, m_s, init, c0 == bos, STORAGE)
            b_cb = tl.dot(b_C, tl.trans(b_B), b_cb, input_precision="tf32x3")
            b_cs = tl.dot(b_C, tl.trans(b_s), b_cs, input_precision="tf32x3")
            b_s = b_s * tl.exp(c_last) + tl.dot(b_xw, b_B, input_precision="tf32x3")
            tl.debug_barrier()  # every thread has read the block's old state before any writes it
            elem = i_h * P * N + o_s
            _state_out(b_s, pool_h + o_s, work_h + o_s, m_s, c0 + BT >= eos, (c0 + BT - bos) % CHUNK == 0,
                       elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING, INTRA)  # fmt: skip
        tl.debug_barrier()  # the working copy's stores are visible to the whole program's next loads

        b_y = block_output(b_cb, b_cs, b_c, b_dt, b_x, b_d, BT)
        tl.store(y + (t[:, None] * H + i_h) * P + o_p[None, :], b_y.to(y.dtype.element_ty), mask=m_tp)

    if bos == eos:
        _store_incoming(pool_h, o_p, init, i_h, pos, sr_key, P, N, BN, STORAGE, MANT_BITS, ROUNDING)
