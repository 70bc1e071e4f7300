"""Triton kernels of the split-KV absorbed MLA decode attention (see the package docstring)."""

from __future__ import annotations

import triton
import triton.language as tl


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
