"""Triton KDA decode step: one program per (sequence x head, block of BV value columns).

Each program streams its [K, BV] slice of the state once in and once out (the state is the only
large operand), so the kernel is bound by memory bandwidth; q/k/gate/beta for the head are tiny and
re-read per value block. All arithmetic is fp32; the pool's storage format is the build constants
STORAGE, MANT_BITS, ROUNDING (`triton_common.store_state`); stochastic rounding hashes the launch
key, the sequence position of the store (`positions`) and the element's index in [H, K, V].

Bit-identical twins: the fp32-twin check requires the 16-bit build to compute exactly what the fp32
build computes. The only reductions are over K (k.S and q.S); their order follows the register
layout of the state tile, which the compiler derives from the load's vector width. VEC fixes the
contiguity the compiler may assume along V (same value for every pool dtype), so every build of a
given (BV, num_warps) gets the same layout and therefore the same summation order."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import kda_gate, l2norm_vec, load_state, store_state


@triton.jit(do_not_specialize=["sr_key"])
def kda_decode_kernel(
    q,
    k,
    v,
    g_raw,
    beta_raw,
    a_log,
    dt_bias,
    pool,
    slots,
    positions,
    o,
    scale,
    sr_key,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    VEC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)  # B*H can exceed the 65535 limit of grid axes 1 and 2
    i_v = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    # same contiguity (VEC) for every pool dtype -> same register layout -> same summation order
    o_v = (o_v // VEC) * VEC + (o_v % VEC)
    m_k = o_k < K
    m_v = o_v < V

    b_q = tl.load(q + i_bh * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_k = tl.load(k + i_bh * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_gr = tl.load(g_raw + i_bh * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_bias = tl.load(dt_bias + i_h * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_a = tl.load(a_log + i_h).to(tl.float32)
    b_beta = tl.sigmoid(tl.load(beta_raw + i_bh).to(tl.float32))
    b_v = tl.load(v + i_bh * V + o_v, mask=m_v, other=0.0).to(tl.float32)

    b_g = tl.where(m_k, kda_gate(b_gr, b_bias, b_a), 0.0)
    b_q = l2norm_vec(b_q) * scale
    b_k = l2norm_vec(b_k)

    slot = tl.load(slots + i_b).to(tl.int64)
    p_s = pool + (slot * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
    m_s = m_k[:, None] & m_v[None, :]
    b_s = load_state(p_s, m_s, STORAGE)

    b_s = b_s * tl.exp(b_g)[:, None]
    b_u = b_beta * (b_v - tl.sum(b_s * b_k[:, None], axis=0))
    b_s = b_s + b_k[:, None] * b_u[None, :]
    b_o = tl.sum(b_s * b_q[:, None], axis=0)

    tl.store(o + i_bh * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if ROUNDING == "sr":
        pos = tl.load(positions + i_b)
    else:
        pos = 0
    elem = (i_h * K + o_k[:, None]) * V + o_v[None, :]
    tl.store(p_s, store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)
