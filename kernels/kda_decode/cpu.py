"""kda_decode on the CPU, float32 torch: one recurrent step vectorised over sequences and heads.
Compute is fp32 whatever the pool dtype; stores round the state format's way (`rounding.store_rows`:
torch's `.to` for round-to-nearest fp16/bf16). `prepare` and `step` are shared with the CPU prefill."""

from __future__ import annotations

import torch

from ..common import check_kda_args, flat_a_log, resolve_format
from ..rounding import store_rows

F32 = torch.float32


def gate(g_raw, A_log, dt_bias):
    H, K = g_raw.shape[-2:]
    x = g_raw.to(F32) + dt_bias.to(F32).reshape(H, K)
    sp = torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))
    return -torch.exp(flat_a_log(A_log, H).to(F32))[:, None] * sp


def l2norm(x):
    x = x.to(F32)
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def prepare(q, k, v, g_raw, beta_raw, A_log, dt_bias):
    K = q.shape[-1]
    return (
        l2norm(q) * K**-0.5,
        l2norm(k),
        v.to(F32),
        gate(g_raw, A_log, dt_bias),  # log decay
        torch.sigmoid(beta_raw.to(F32)),
    )


def step(S, q, k, v, decay, beta):
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
    qn, kn, vv, g, beta = prepare(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    idx = slots.long()
    S = state_pool.index_select(0, idx).to(F32)  # index_select: a faster gather than [idx]
    o = step(S, qn, kn, vv, torch.exp(g), beta)
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=positions)
    return o.to(q.dtype)
