"""Absorbed MLA decode attention over a paged latent cache (Triton; one token per sequence).

scores[h, t] = scale * (q_lat[h] . c[t] + q_rot[h] . k_rot[t]),  out[h] = softmax(scores[h]) @ c
with c, k_rot the cached rows of the sequence (pool row = block_tables[b, t // bs] * bs + t % bs).

One program per (sequence, group of heads) walks its own context in a fixed order with an online
softmax, so a row's result never depends on the other rows of the batch (batch invariance), and
the loop bound is read from `context_lens` on the device (CUDA-graph safe)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _mla_decode_kernel(
    QL,
    QR,
    POOL,
    BT,
    CL,
    OUT,
    scale,
    H,
    bs,
    stride_pool,
    stride_bt,
    R: tl.constexpr,
    P: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = h < H
    r = tl.arange(0, R)
    p = tl.arange(0, P)
    ql = tl.load(QL + (b * H + h)[:, None] * R + r[None, :], mask=hmask[:, None], other=0.0)
    qr = tl.load(QR + (b * H + h)[:, None] * P + p[None, :], mask=hmask[:, None], other=0.0)
    L = tl.load(CL + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, R], tl.float32)
    for start in range(0, L, BLOCK_N):
        t = start + tl.arange(0, BLOCK_N)
        valid = t < L
        blk = tl.load(BT + b * stride_bt + t // bs, mask=valid, other=0)
        rows = (blk.to(tl.int64) * bs + t % bs) * stride_pool
        c = tl.load(POOL + rows[:, None] + r[None, :], mask=valid[:, None], other=0.0)
        kr = tl.load(POOL + rows[:, None] + R + p[None, :], mask=valid[:, None], other=0.0)
        s = tl.dot(ql.to(c.dtype), tl.trans(c)) + tl.dot(qr.to(kr.dtype), tl.trans(kr))
        s = tl.where(valid[None, :], s * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        pr = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, 1)
        acc = acc * alpha[:, None] + tl.dot(pr.to(c.dtype), c)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(OUT + (b * H + h)[:, None] * R + r[None, :], out, mask=hmask[:, None])


def mla_decode_attention(
    q_lat: torch.Tensor,
    q_rot: torch.Tensor,
    pool: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    block_size: int,
    block_n: int = 32,
) -> torch.Tensor:
    """q_lat [B, H, R], q_rot [B, H, P], pool [rows, R+P], block_tables [B, max_blocks] int32,
    context_lens [B] int32 (>= 1) -> out [B, H, R] fp32 (the attention-weighted latent)."""
    B, H, R = q_lat.shape
    P = q_rot.shape[-1]
    assert pool.shape[-1] == R + P and pool.stride(-1) == 1
    assert R & (R - 1) == 0 and P & (P - 1) == 0, "latent and rope dims must be powers of two"
    out = torch.empty(B, H, R, dtype=torch.float32, device=q_lat.device)
    block_h = 16
    block_n = min(block_n, block_size) if block_size & (block_size - 1) == 0 else block_n
    grid = (B, triton.cdiv(H, block_h))
    _mla_decode_kernel[grid](
        q_lat,
        q_rot,
        pool,
        block_tables,
        context_lens,
        out,
        scale,
        H,
        block_size,
        pool.stride(0),
        block_tables.stride(0),
        R=R,
        P=P,
        BLOCK_H=block_h,
        BLOCK_N=max(16, block_n),
        num_warps=4,
    )
    return out
