"""Triton SSD decode step: one program per (sequence x head, block of BP rows of the [P, N] state).

Each program streams its [BP, N] slice of the state once in and once out (the state is the only
large operand); x, dt, B, C of the head are tiny. All arithmetic is fp32; the pool's storage
format is the build constants STORAGE, MANT_BITS, ROUNDING (`triton_common.store_state`);
stochastic rounding hashes the launch key, the store's sequence position and the element's index
in [H, P, N].

Bit-identical twins (the fp32-twin check): the one reduction is over N (the readout S C), along
the state's contiguous axis. VEC fixes the contiguity the compiler may assume along N, the same
for every pool dtype, so each build gets the same register layout and summation order (as the KDA
decode kernel does along V; VEC * 4 bytes <= 16)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import load_state, store_state


@triton.jit
def softplus(x):
    """torch's softplus (threshold 20): x above 20, else log(1 + exp(x))."""
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))


@triton.jit
def ssd_step(b_s, b_x, b_B, b_C, b_dt, b_a, b_d):
    """One token on a [BP, BN] state block: S <- exp(dt A) S + (dt x) B^T, y = S C + D x (the
    decode step's arithmetic; drift's one-launch loop calls it too, so the two cannot drift apart)."""
    b_s = b_s * tl.exp(b_dt * b_a) + (b_dt * b_x)[:, None] * b_B[None, :]
    b_y = tl.sum(b_s * b_C[None, :], axis=1) + b_d * b_x
    return b_s, b_y


@triton.jit(do_not_specialize=["sr_key"])
def ssd_decode_kernel(
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
    y,
    sr_key,
    H: tl.constexpr,
    G: tl.constexpr,
    P: tl.constexpr,
    N: tl.constexpr,
    BP: tl.constexpr,
    BN: tl.constexpr,
    VEC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)  # B*H can exceed the 65535 limit of grid axes 1 and 2
    i_p = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    i_g = i_h // (H // G)

    o_p = i_p * BP + tl.arange(0, BP)
    o_n = tl.arange(0, BN)
    o_n = (o_n // VEC) * VEC + (o_n % VEC)  # same contiguity for every pool dtype
    m_p = o_p < P
    m_n = o_n < N
    m_s = m_p[:, None] & m_n[None, :]

    slot = tl.load(slots + i_b).to(tl.int64)
    p_s = pool + (slot * H + i_h) * P * N + o_p[:, None] * N + o_n[None, :]
    b_s = load_state(p_s, m_s, STORAGE)

    b_x = tl.load(x + i_bh * P + o_p, mask=m_p, other=0.0).to(tl.float32)
    b_B = tl.load(b_in + (i_b * G + i_g) * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_C = tl.load(c_in + (i_b * G + i_g) * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_dt = softplus(tl.load(dt_raw + i_bh).to(tl.float32) + tl.load(dt_bias + i_h).to(tl.float32))
    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_d = tl.load(d_skip + i_h).to(tl.float32)

    b_s, b_y = ssd_step(b_s, b_x, b_B, b_C, b_dt, b_a, b_d)
    tl.store(y + i_bh * P + o_p, b_y.to(y.dtype.element_ty), mask=m_p)

    if ROUNDING == "sr":
        pos = tl.load(positions + i_b)
    else:
        pos = 0
    elem = (i_h * P + o_p[:, None]) * N + o_n[None, :]
    tl.store(p_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)
