"""Float32 torch implementations with the Triton wrappers' signatures: the engine's CPU path.

Decode is one recurrent step vectorised over sequences and heads. Prefill computes each sequence
in chunks with matrix products (`kda_prefill/cpu_chunked.py`, the Triton kernel's WY/UT algebra);
the token loop it replaced paid Python overhead per token. Compute is fp32 whatever the pool
dtype; stores round the state format's way (`rounding.store_rows`: torch's `.to` for
round-to-nearest fp16/bf16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import check_kda_args, check_varlen, flat_a_log, resolve_format
from .kda_prefill.cpu_chunked import chunked_sequence
from .rounding import store_rows

F32 = torch.float32


def _gate(g_raw, A_log, dt_bias):
    H, K = g_raw.shape[-2:]
    x = g_raw.to(F32) + dt_bias.to(F32).reshape(H, K)
    sp = torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))
    return -torch.exp(flat_a_log(A_log, H).to(F32))[:, None] * sp


def _l2norm(x):
    x = x.to(F32)
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _prepare(q, k, v, g_raw, beta_raw, A_log, dt_bias):
    K = q.shape[-1]
    return (
        _l2norm(q) * K**-0.5,
        _l2norm(k),
        v.to(F32),
        _gate(g_raw, A_log, dt_bias),  # log decay
        torch.sigmoid(beta_raw.to(F32)),
    )


def _step(S, q, k, v, decay, beta):
    """S [n, H, K, V] fp32 updated in place; q/k/decay [n, H, K]; v [n, H, V]; beta [n, H]."""
    S.mul_(decay[..., None])
    u = beta[..., None] * (v - torch.einsum("nhk,nhkv->nhv", k, S))
    S.add_(k[..., None] * u[..., None, :])
    return torch.einsum("nhk,nhkv->nhv", q, S)


def kda_decode(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=False)
    fmt = resolve_format(fmt, state_pool, positions, q.shape[0])
    qn, kn, vv, g, beta = _prepare(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    idx = slots.long()
    S = state_pool[idx].to(F32)
    o = _step(S, qn, kn, vv, torch.exp(g), beta)
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=positions)
    return o.to(q.dtype)


def kda_prefill(
    q,
    k,
    v,
    g_raw,
    beta_raw,
    A_log,
    dt_bias,
    state_pool,
    slots,
    cu_seqlens,
    has_initial_state,
    *,
    chunk_size: int = 64,
    intra_chunk_dtype: torch.dtype | None = None,
    fmt=None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=True)
    check_varlen(cu_seqlens, has_initial_state, slots, q.shape[0])
    fmt = resolve_format(fmt, state_pool, positions, slots.numel())
    cu = cu_seqlens.long().cpu()
    lens = cu[1:] - cu[:-1]
    order = torch.argsort(lens, descending=True, stable=True)
    lens_sorted, starts = lens[order], cu[:-1][order]
    idx = slots.long()[order.to(slots.device)]
    init = has_initial_state.bool()[order.to(has_initial_state.device)]
    S = state_pool[idx].to(F32)
    S[~init] = 0.0
    o = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=F32, device=q.device)
    for n in range(int(lens_sorted.numel())):  # each sequence on its own: batch invariant
        bos, eos = int(starts[n]), int(starts[n] + lens_sorted[n])
        rows = slice(bos, eos)
        # inputs prepared per sequence too: SIMD bodies and scalar tails of exp/sigmoid differ in
        # the last bit, so an element's result must not depend on its offset in the packed batch
        qn, kn, vv, g, beta = _prepare(q[rows], k[rows], v[rows], g_raw[rows], beta_raw[rows], A_log, dt_bias)
        o[rows] = chunked_sequence(
            qn, kn, vv, g, beta, S[n], chunk_size=chunk_size, intra_chunk_dtype=intra_chunk_dtype
        )
    pos = None if positions is None else positions[order.to(positions.device)]
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=pos)
    return o.to(q.dtype)


def causal_conv1d_prefill(x, weight, conv_pool, slots, cu_seqlens, has_initial_state) -> torch.Tensor:
    T, C = x.shape
    W = weight.shape[-1]
    w = weight.reshape(C, 1, W).to(F32)
    y = torch.empty(T, C, dtype=F32, device=x.device)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        prev = conv_pool[slot].to(F32)
        if not bool(has_initial_state[n]):
            prev = torch.zeros_like(prev)
        window = torch.cat([prev, x[bos:eos].to(F32).T], dim=1)
        y[bos:eos] = F.silu(F.conv1d(window[None], w, groups=C)[0]).T
        conv_pool[slot] = window[:, -(W - 1) :].to(conv_pool.dtype)
    return y.to(x.dtype)


def causal_conv1d_decode(x, weight, conv_pool, slots) -> torch.Tensor:
    B, C = x.shape
    W = weight.shape[-1]
    idx = slots.long()
    window = torch.cat([conv_pool[idx].to(F32), x.to(F32)[:, :, None]], dim=2)  # [B, C, W]
    y = F.silu((window * weight.reshape(1, C, W).to(F32)).sum(-1))
    conv_pool[idx] = window[:, :, 1:].to(conv_pool.dtype)
    return y.to(x.dtype)


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    x = o.to(F32)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return (x * weight.to(F32) * torch.sigmoid(gate.to(F32))).to(o.dtype)
