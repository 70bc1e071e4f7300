"""Triton SSD prefill: one program per (sequence, head, block of BP state rows), walking the
sequence in chunks of BT tokens with the chunk algebra of transformers' `mamba2_chunk_scan`
(mamba2.md §3; `ssd_prefill/cpu.py` is the same algebra in torch):

    c = cumsum(dt A) within the chunk,
    y = (C B^T * exp(c_l - c_s) [s <= l] * dt_s) x + exp(c_l) C S^T + D x,
    S <- exp(c_last) S + (x * exp(c_last - c) dt)^T B.

The state stays in fp32 registers across chunks and is stored once, at the sequence's end, in the
pool's format (`triton_common.store_state`; SR hashes the launch key, the store's position and the
element's index in [H, P, N]); INTRA ("fp16" | "bf16") also rounds the carried state after every
chunk but the sequence's last, as the KDA prefill's intra-chunk dtype. Tokens past the sequence's
end are masked to dt = 0 and x = 0: no decay and no increment, so they change nothing. The
products run as 3xTF32 (`input_precision` "tf32x3", fp32-accurate on tensor cores, as the KDA
prefill's fp32 form; plain tf32 would change the state math, and "ieee" dots run on FMA units and
spilled ~7.6 KB per thread at NemotronH's dims on sm_90, 3xTF32 ~1.4 KB: still to be tiled). The fp32 twin
of a rounding build loads the same widened state and runs the same products; only the final
store differs."""

from __future__ import annotations

import triton
import triton.language as tl

from ..ssd_decode.kernel import softplus
from ..triton_common import load_state, round_to, store_state


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
    o_n = tl.arange(0, BN)
    o_t = tl.arange(0, BT)
    m_p = o_p < P
    m_n = o_n < N
    m_s = m_p[:, None] & m_n[None, :]

    slot = tl.load(slots + i_n).to(tl.int64)
    p_s = pool + (slot * H + i_h) * P * N + o_p[:, None] * N + o_n[None, :]
    init = tl.load(has_initial_state + i_n) != 0
    b_s = tl.where(init, load_state(p_s, m_s, STORAGE), 0.0)  # a new sequence starts from zeros

    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_bias = tl.load(dt_bias + i_h).to(tl.float32)
    b_d = tl.load(d_skip + i_h).to(tl.float32)
    causal = o_t[:, None] >= o_t[None, :]
    last = o_t == BT - 1

    for c0 in range(bos, eos, BT):
        t = c0 + o_t
        m_t = t < eos
        m_tp = m_t[:, None] & m_p[None, :]
        m_tn = m_t[:, None] & m_n[None, :]
        b_x = tl.load(x + (t[:, None] * H + i_h) * P + o_p[None, :], mask=m_tp, other=0.0).to(tl.float32)
        b_B = tl.load(b_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(tl.float32)
        b_C = tl.load(c_in + (t[:, None] * G + i_g) * N + o_n[None, :], mask=m_tn, other=0.0).to(tl.float32)
        b_dr = tl.load(dt_raw + t * H + i_h, mask=m_t, other=0.0).to(tl.float32)
        b_dt = tl.where(m_t, softplus(b_dr + b_bias), 0.0)

        b_c = tl.cumsum(b_dt * b_a, axis=0)  # [BT]
        decay = tl.exp(tl.where(causal, b_c[:, None] - b_c[None, :], -float("inf")))
        scores = tl.dot(b_C, tl.trans(b_B), input_precision="tf32x3") * decay * b_dt[None, :]
        b_y = tl.dot(scores, b_x, input_precision="tf32x3")
        b_y += tl.exp(b_c)[:, None] * tl.dot(b_C, tl.trans(b_s), input_precision="tf32x3")
        b_y += b_d * b_x
        tl.store(y + (t[:, None] * H + i_h) * P + o_p[None, :], b_y.to(y.dtype.element_ty), mask=m_tp)

        c_last = tl.sum(tl.where(last, b_c, 0.0), axis=0)
        w = tl.exp(c_last - b_c) * b_dt
        b_s = b_s * tl.exp(c_last) + tl.dot(tl.trans(b_x * w[:, None]), b_B, input_precision="tf32x3")
        if INTRA != "":  # the carried state rounded (to nearest) after every chunk but the last
            if c0 + BT < eos:
                if INTRA == "bf16":  # bit arithmetic: the interpreter's own conversion truncates
                    b_s = round_to(b_s, tl.bfloat16).to(tl.float32)
                else:
                    b_s = round_to(b_s, tl.float16).to(tl.float32)

    if ROUNDING == "sr":
        pos = tl.load(positions + i_n)
    else:
        pos = 0
    elem = (i_h * P + o_p[:, None]) * N + o_n[None, :]
    tl.store(p_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)
