"""Triton KDA decode step: one program per (sequence x head, block of BV value columns).

Each program streams its [K, BV] slice of the state once in and once out (the state is the only
large operand), so the kernel is bound by memory bandwidth; q/k/gate/beta for the head are tiny and
re-read per value block. All arithmetic is fp32; the pool's storage format is the build constants
STORAGE, MANT_BITS, ROUNDING (`triton_common.store_state`); stochastic rounding hashes the launch
key, the sequence position of the store (`positions`) and the element's index in [H, K, V].

Bit-identical twins: the fp32-twin check requires the 16-bit build to compute exactly what the fp32
build computes. The only reductions are over K (k.S and q.S); their order follows the register
layout of the state tile, which the compiler derives from the load's vector width. VEC fixes the
contiguity the compiler may assume along V (part of the tile configuration, the same for every
pool dtype), so every build of a given tile gets the same layout and therefore the same summation
order -- as long as VEC * 4 bytes <= 16: Triton gives a thread at most 128 bits of a load, so at
VEC = 8 the fp32 build holds 4 values per thread along V and a 16-bit build 8, and they sum in
different orders (tests/test_kernels_compile.py shows it; the wrapper's TWIN_SAFE_VEC).

Build options that move bytes differently without changing a single result (the benchmark's decode
sweep times them; tests hold every one to the float64 reference and to the twin rule):
- EVEN: K == BK and V % BV == 0, so the state, q/k/v and o accesses carry no masks (a mask is a
  predicate per access and can stop the compiler from vectorising).
- LOAD_CACHE / STORE_CACHE / EVICT: cache hints for the streamed state, which no other program
  reads (".cg" load + ".cs" store, or evict_first on both); "" = none.
- V_INNER: a 1-D grid with the value blocks of one head adjacent, so the programs that share a
  head's DRAM pages run together (the 2-D grid runs all heads' block 0 first, reading 1/NV of
  every page at a time).
- EARLY: the slot and state loads are issued first, before the q/k loads and the norms (their
  reductions end in barriers, which the state load otherwise waits behind).
- PERSIST: a fixed grid of programs, each walking its tiles in a loop and loading the next tile's
  state before updating the current one (software prefetch), so a program's loads overlap its own
  sums over K instead of waiting for another program to be scheduled; the tile's arithmetic is the
  same code, so every result is the same bit for bit. 0 = one program per tile.
- RELOAD: the state tile is read twice, for the sum k.S (first pass) and again for the update, the
  store and q.S (second pass, a cache hit: the first load asks to keep the lines, the second to
  drop them), instead of being held in registers across the first sum's barriers. A 16-bit pool's
  tile then lives in registers at its stored width while its load is in flight, so the same
  registers hold twice as many of its bytes in flight (Nsight Compute on an H100: the 16-bit
  steps stall on their loads with 4 programs per SM, all that the registers of the widened tile
  allow). Both passes compute the plain build's products in its order (`delta_rule`'s parts)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import kda_gate, l2norm_vec, load_state, store_state, widen_state


@triton.jit
def _load_pool_raw(p, mask, EVEN: tl.constexpr, LOAD_CACHE: tl.constexpr, EVICT: tl.constexpr):
    """The pool's stored values with the build's mask and cache options, not yet widened (a
    prefetched 16-bit tile held this way takes half the registers)."""
    if EVEN:
        return tl.load(p, cache_modifier=LOAD_CACHE, eviction_policy=EVICT)
    else:
        return tl.load(p, mask=mask, other=0, cache_modifier=LOAD_CACHE, eviction_policy=EVICT)


@triton.jit
def _load_pool(
    p, mask, STORAGE: tl.constexpr, EVEN: tl.constexpr, LOAD_CACHE: tl.constexpr, EVICT: tl.constexpr
):
    """`triton_common.load_state` with the build's mask and cache options (the same widening,
    `widen_state`); the plain build calls load_state."""
    if not EVEN and LOAD_CACHE == "" and EVICT == "":
        return load_state(p, mask, STORAGE)
    return widen_state(_load_pool_raw(p, mask, EVEN, LOAD_CACHE, EVICT), STORAGE)


@triton.jit
def _load_vec(p, mask, EVEN: tl.constexpr):
    """A small operand (q/k/g/bias/v rows) as fp32, masked unless EVEN."""
    if EVEN:
        return tl.load(p).to(tl.float32)
    else:
        return tl.load(p, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _tile_index(t, V: tl.constexpr, BV: tl.constexpr):
    """(sequence x head, value block) of tile t of the 1-D order (a head's value blocks adjacent)."""
    NV: tl.constexpr = (V + BV - 1) // BV
    return t // NV, t % NV


@triton.jit
def delta_rule(b_s, b_q, b_k, b_g, b_beta, b_v):
    """One token's update of a [K, BV] fp32 state tile and its output block: decay, the delta rule,
    o = S^T q. Every decode-mode kernel calls this one (or its two parts, below, in this order),
    so their sums over K run in one order."""
    b_sd = decay(b_s, b_g)
    return delta_update(b_sd, b_q, b_k, delta_u(b_sd, b_k, b_beta, b_v))


@triton.jit
def decay(b_s, b_g):
    """The state tile decayed by exp(g) along K (the same product in every pass that needs it)."""
    return b_s * tl.exp(b_g)[:, None]


@triton.jit
def delta_u(b_sd, b_k, b_beta, b_v):
    """The delta rule's correction u = beta (v - k.S) of the decayed tile, one value per column."""
    return b_beta * (b_v - tl.sum(b_sd * b_k[:, None], axis=0))


@triton.jit
def delta_update(b_sd, b_q, b_k, b_u):
    """The decayed tile's update S + k u^T and its output block o = S^T q."""
    b_s = b_sd + b_k[:, None] * b_u[None, :]
    return b_s, tl.sum(b_s * b_q[:, None], axis=0)


@triton.jit
def tile_offsets(i_v, BK: tl.constexpr, BV: tl.constexpr, VEC: tl.constexpr):
    """Row (K) and column (V) offsets of value block i_v, columns in the tile's VEC order."""
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    # same contiguity (VEC) for every pool dtype -> same register layout -> same summation order
    o_v = (o_v // VEC) * VEC + (o_v % VEC)
    return o_k, o_v


@triton.jit
def _state_ptrs(pool, slots, i_bh, o_k, o_v, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    i_b = i_bh // H
    i_h = i_bh % H
    slot = tl.load(slots + i_b).to(tl.int64)
    return pool + (slot * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]


@triton.jit
def _head_inputs(q, k, g_raw, beta_raw, a_log, dt_bias, v, i_bh, o_k, o_v, m_k, m_v, scale,
                 H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, EVEN: tl.constexpr):  # fmt: skip
    """The token's q, k (normalised), decay, beta and value block of head i_bh, all fp32."""
    i_h = i_bh % H
    b_q = _load_vec(q + i_bh * K + o_k, m_k, EVEN)
    b_k = _load_vec(k + i_bh * K + o_k, m_k, EVEN)
    b_gr = _load_vec(g_raw + i_bh * K + o_k, m_k, EVEN)
    b_bias = _load_vec(dt_bias + i_h * K + o_k, m_k, EVEN)
    b_a = tl.load(a_log + i_h).to(tl.float32)
    b_beta = tl.sigmoid(tl.load(beta_raw + i_bh).to(tl.float32))
    b_v = _load_vec(v + i_bh * V + o_v, m_v, EVEN)
    if EVEN:
        b_g = kda_gate(b_gr, b_bias, b_a)
    else:
        b_g = tl.where(m_k, kda_gate(b_gr, b_bias, b_a), 0.0)
    b_q = l2norm_vec(b_q) * scale
    b_k = l2norm_vec(b_k)
    return b_q, b_k, b_g, b_beta, b_v


@triton.jit
def _update_and_store(b_s, p_s, b_q, b_k, b_g, b_beta, b_v, o, positions, sr_key, i_bh, o_k, o_v, m_v, m_s,
                      H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, STORAGE: tl.constexpr,
                      MANT_BITS: tl.constexpr, ROUNDING: tl.constexpr, EVEN: tl.constexpr,
                      LOAD_CACHE: tl.constexpr, STORE_CACHE: tl.constexpr, EVICT: tl.constexpr,
                      RELOAD: tl.constexpr):  # fmt: skip
    """The delta rule on one [K, BV] state tile (fp32), its output block, and the rounded store
    (RELOAD: b_s is the first pass's tile; the second pass reads the pool again)."""
    i_b = i_bh // H
    i_h = i_bh % H
    if RELOAD:
        b_u = delta_u(decay(b_s, b_g), b_k, b_beta, b_v)
        b_s = _load_pool(p_s, m_s, STORAGE, EVEN, LOAD_CACHE, "evict_first")
        b_s, b_o = delta_update(decay(b_s, b_g), b_q, b_k, b_u)
    else:
        b_s, b_o = delta_rule(b_s, b_q, b_k, b_g, b_beta, b_v)

    if EVEN:
        tl.store(o + i_bh * V + o_v, b_o.to(o.dtype.element_ty))
    else:
        tl.store(o + i_bh * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if ROUNDING == "sr":
        pos = tl.load(positions + i_b)
    else:
        pos = 0
    elem = (i_h * K + o_k[:, None]) * V + o_v[None, :]
    b_new = store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING)
    if EVEN:
        tl.store(p_s, b_new, cache_modifier=STORE_CACHE, eviction_policy=EVICT)
    else:
        tl.store(p_s, b_new, mask=m_s, cache_modifier=STORE_CACHE, eviction_policy=EVICT)


@triton.jit(do_not_specialize=["sr_key", "n_tiles"])
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
    n_tiles,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    VEC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
    EVEN: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    EVICT: tl.constexpr,
    V_INNER: tl.constexpr,
    EARLY: tl.constexpr,
    PERSIST: tl.constexpr,
    RELOAD: tl.constexpr,
):
    m_k = tl.arange(0, BK) < K
    if PERSIST:  # programs walk tiles pid, pid + P, ... in the 1-D order; the next state loads first
        n_prog = tl.num_programs(0)
        t = tl.program_id(0).to(tl.int64)
        i_bh, i_v = _tile_index(t, V, BV)
        o_k, o_v = tile_offsets(i_v, BK, BV, VEC)
        m_s = m_k[:, None] & (o_v < V)[None, :]
        b_raw = _load_pool_raw(
            _state_ptrs(pool, slots, i_bh, o_k, o_v, H, K, V), m_s, EVEN, LOAD_CACHE, EVICT
        )
        while t < n_tiles:
            # only the tile index and the raw state cross iterations (pointers and masks would take
            # two registers and one per element); the last tile re-reads itself, a load nobody uses
            t_next = tl.minimum(t + n_prog, n_tiles - 1)
            j_bh, j_v = _tile_index(t_next, V, BV)
            n_k, n_v = tile_offsets(j_v, BK, BV, VEC)
            n_ms = m_k[:, None] & (n_v < V)[None, :]
            b_next = _load_pool_raw(
                _state_ptrs(pool, slots, j_bh, n_k, n_v, H, K, V), n_ms, EVEN, LOAD_CACHE, EVICT
            )
            i_bh, i_v = _tile_index(t, V, BV)
            o_k, o_v = tile_offsets(i_v, BK, BV, VEC)
            m_v = o_v < V
            m_s = m_k[:, None] & m_v[None, :]
            p_s = _state_ptrs(pool, slots, i_bh, o_k, o_v, H, K, V)
            b_q, b_k, b_g, b_beta, b_v = _head_inputs(
                q, k, g_raw, beta_raw, a_log, dt_bias, v, i_bh, o_k, o_v, m_k, m_v, scale, H, K, V, EVEN
            )
            b_s = widen_state(b_raw, STORAGE)
            _update_and_store(b_s, p_s, b_q, b_k, b_g, b_beta, b_v, o, positions, sr_key, i_bh, o_k, o_v,
                              m_v, m_s, H, K, V, STORAGE, MANT_BITS, ROUNDING, EVEN, LOAD_CACHE,
                              STORE_CACHE, EVICT, False)  # fmt: skip
            t += n_prog
            b_raw = b_next
    else:
        if V_INNER:  # one axis: B*H*NV programs, the NV value blocks of a head side by side
            i_bh, i_v = _tile_index(tl.program_id(0).to(tl.int64), V, BV)
        else:
            i_bh = tl.program_id(0).to(tl.int64)  # B*H can exceed the 65535 limit of grid axes 1 and 2
            i_v = tl.program_id(1)
        o_k, o_v = tile_offsets(i_v, BK, BV, VEC)
        m_v = o_v < V
        m_s = m_k[:, None] & m_v[None, :]
        # RELOAD: the first read asks the cache to keep the lines for the second
        evict_in: tl.constexpr = "evict_last" if RELOAD else EVICT
        if EARLY:
            p_s = _state_ptrs(pool, slots, i_bh, o_k, o_v, H, K, V)
            b_s = _load_pool(p_s, m_s, STORAGE, EVEN, LOAD_CACHE, evict_in)
        b_q, b_k, b_g, b_beta, b_v = _head_inputs(
            q, k, g_raw, beta_raw, a_log, dt_bias, v, i_bh, o_k, o_v, m_k, m_v, scale, H, K, V, EVEN
        )
        if not EARLY:
            p_s = _state_ptrs(pool, slots, i_bh, o_k, o_v, H, K, V)
            b_s = _load_pool(p_s, m_s, STORAGE, EVEN, LOAD_CACHE, evict_in)
        _update_and_store(b_s, p_s, b_q, b_k, b_g, b_beta, b_v, o, positions, sr_key, i_bh, o_k, o_v, m_v,
                          m_s, H, K, V, STORAGE, MANT_BITS, ROUNDING, EVEN, LOAD_CACHE, STORE_CACHE, EVICT,
                          RELOAD)  # fmt: skip
