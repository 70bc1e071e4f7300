"""Absorbed MLA decode attention over a paged latent cache (Triton; one token per sequence).

scores[h, t] = scale * (q_lat[h] . c[t] + q_rot[h] . k_rot[t]),  out[h] = softmax(scores[h]) @ c
with c, k_rot the cached rows of the sequence (pool row = block_tables[b, t // bs] * bs + t % bs).

Split-KV ("flash decoding"): a sequence's context is cut into splits of SPLIT tokens; one program
per (sequence, group of heads, split) computes a partial softmax, and a second kernel combines a
sequence's partials in split order. Splits depend only on the sequence's own length, and the
combine is a sequential loop over that sequence's splits, so a row's result is the same whatever
the other rows, the grid size (`num_splits`) or the launch (CUDA graph or eager): batch invariant.
Programs whose split lies beyond the context exit at once, so a CUDA graph captured with a fixed
`num_splits` serves every context up to num_splits * SPLIT tokens."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .mla import MLA_DECODE_SPLIT as SPLIT  # tokens per split


@triton.jit
def _mla_partial_kernel(
    QL, QR, POOL, BT, CL, ACC, ML,
    scale, H, bs, stride_pool, stride_bt, S,
    R: tl.constexpr, P: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_LEN: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    hb = tl.program_id(1)
    s = tl.program_id(2)
    L = tl.load(CL + b)
    lo = s * SPLIT_LEN
    if lo < L:
        hi = tl.minimum(lo + SPLIT_LEN, L)
        h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
        hmask = h < H
        r = tl.arange(0, R)
        p = tl.arange(0, P)
        ql = tl.load(QL + (b * H + h)[:, None] * R + r[None, :], mask=hmask[:, None], other=0.0)
        qr = tl.load(QR + (b * H + h)[:, None] * P + p[None, :], mask=hmask[:, None], other=0.0)
        m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_H], tl.float32)
        acc = tl.zeros([BLOCK_H, R], tl.float32)
        for start in range(lo, hi, BLOCK_N):
            t = start + tl.arange(0, BLOCK_N)
            valid = t < hi
            blk = tl.load(BT + b * stride_bt + t // bs, mask=valid, other=0)
            rows = (blk.to(tl.int64) * bs + t % bs) * stride_pool
            c = tl.load(POOL + rows[:, None] + r[None, :], mask=valid[:, None], other=0.0)
            kr = tl.load(POOL + rows[:, None] + R + p[None, :], mask=valid[:, None], other=0.0)
            sc = tl.dot(ql.to(c.dtype), tl.trans(c)) + tl.dot(qr.to(kr.dtype), tl.trans(kr))
            sc = tl.where(valid[None, :], sc * scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, 1))
            alpha = tl.exp(m_i - m_new)
            pr = tl.exp(sc - m_new[:, None])
            l_i = l_i * alpha + tl.sum(pr, 1)
            acc = acc * alpha[:, None] + tl.dot(pr.to(c.dtype), c)
            m_i = m_new
        base = (b * H + h) * S + s
        tl.store(ACC + base[:, None] * R + r[None, :], acc, mask=hmask[:, None])
        tl.store(ML + base * 2, m_i, mask=hmask)
        tl.store(ML + base * 2 + 1, l_i, mask=hmask)


@triton.jit
def _mla_combine_kernel(ACC, ML, CL, OUT, H, S, R: tl.constexpr, SPLIT_LEN: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    L = tl.load(CL + b)
    n = (L + SPLIT_LEN - 1) // SPLIT_LEN
    r = tl.arange(0, R)
    m_t = tl.full([1], float("-inf"), tl.float32)
    l_t = tl.zeros([1], tl.float32)
    acc = tl.zeros([R], tl.float32)
    for s in range(0, n):  # in split order: the same sum whatever the grid
        base = (b * H + h) * S + s
        m_s = tl.load(ML + base * 2)
        l_s = tl.load(ML + base * 2 + 1)
        a_s = tl.load(ACC + base * R + r)
        m_new = tl.maximum(m_t, m_s)
        alpha = tl.exp(m_t - m_new)
        beta = tl.exp(m_s - m_new)
        acc = acc * alpha + a_s * beta
        l_t = l_t * alpha + l_s * beta
        m_t = m_new
    tl.store(OUT + (b * H + h) * R + r, acc / l_t)


def splits_for(context_len: int) -> int:
    return max(1, -(-int(context_len) // SPLIT))


def mla_decode_attention(
    q_lat: torch.Tensor,
    q_rot: torch.Tensor,
    pool: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    block_size: int,
    num_splits: int,
    rows: int | None = None,
    block_n: int = 32,
) -> torch.Tensor:
    """q_lat [B, H, R], q_rot [B, H, P], pool [rows, R+P], block_tables [B, max_blocks] int32,
    context_lens [B] int32 (>= 1, <= num_splits * SPLIT) -> out [B, H, R] fp32 (the attention-
    weighted latent). `rows`: compute only the first rows (the others come back as zeros)."""
    B, H, R = q_lat.shape
    P = q_rot.shape[-1]
    n = B if rows is None else rows
    assert pool.shape[-1] == R + P and pool.stride(-1) == 1
    assert R & (R - 1) == 0 and P & (P - 1) == 0, "latent and rope dims must be powers of two"
    out = (torch.empty if n == B else torch.zeros)(B, H, R, dtype=torch.float32, device=q_lat.device)
    if n == 0:
        return out
    S = int(num_splits)
    acc = torch.empty(n, H, S, R, dtype=torch.float32, device=q_lat.device)
    ml = torch.empty(n, H, S, 2, dtype=torch.float32, device=q_lat.device)
    block_h = 16
    _mla_partial_kernel[(n, triton.cdiv(H, block_h), S)](
        q_lat, q_rot, pool, block_tables, context_lens, acc, ml,
        scale, H, block_size, pool.stride(0), block_tables.stride(0), S,
        R=R, P=P, BLOCK_H=block_h, BLOCK_N=block_n, SPLIT_LEN=SPLIT, num_warps=4,
    )  # fmt: skip
    _mla_combine_kernel[(n, H)](acc, ml, context_lens, out, H, S, R=R, SPLIT_LEN=SPLIT, num_warps=1)
    return out
