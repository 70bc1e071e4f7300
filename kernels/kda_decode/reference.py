"""Float64 token-by-token reference of kda_decode (and the per-token pieces the prefill reference
reuses): exactly the math of the Kimi Linear KDA recurrence, written for clarity, not speed.

Stores: without a format, the exact state is rounded once to the pool dtype (float64 pools keep it
exact); with a format `fmt` (or an fp8 pool), the state is rounded to fp32 and then the format's
way (`rounding.round_to_format`, the kernels' oracle), and a float64 pool receives that rounded
value: the reference of an arm whose stores round, carried exactly in between."""

from __future__ import annotations

import torch

from ..common import STATE_DTYPES, check_kda_args, flat_a_log
from ..errors import KernelInputError
from ..formats import parse_format
from ..rounding import round_to_format

F64 = torch.float64


def softplus(x: torch.Tensor) -> torch.Tensor:
    """Kimi's softplus: where(x > 20, x, log(1 + exp(x))) (not log1p: tiny x gives exactly 0)."""
    return torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))


def gate(g_raw: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    """Per-channel log decay g = -exp(A_log[h]) * softplus(g_raw + dt_bias), shape [..., H, K]."""
    H, K = g_raw.shape[-2:]
    x = g_raw.to(F64) + dt_bias.to(F64).reshape(H, K)
    return -torch.exp(flat_a_log(A_log, H).to(F64))[:, None] * softplus(x)


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(sum x^2 + 1e-6) over the head dim (sqrt and a division, as FLA/Kimi do)."""
    x = x.to(F64)
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def step(S: torch.Tensor, q, k, v, g, beta) -> tuple[torch.Tensor, torch.Tensor]:
    """One token for one head: S [K, V], q/k/g [K] (q, k already normalised, q scaled), v [V].

    Decay the K rows, delta rule, read out from the updated state."""
    S = S * torch.exp(g)[:, None]
    S = S + torch.outer(k, beta * (v - S.T @ k))
    return S, S.T @ q


def store(state_pool: torch.Tensor, slot: int, S: torch.Tensor, fmt, sr_seed: int, position) -> None:
    """pool[slot] = the float64 state S [H, K, V] as stored (see the module docstring)."""
    if fmt is None and (state_pool.dtype == F64 or state_pool.dtype in STATE_DTYPES.values()):
        state_pool[slot] = S.to(state_pool.dtype)
        return
    fmt = parse_format(state_pool.dtype if fmt is None else fmt)
    if state_pool.dtype not in (F64, fmt.pool_dtype):
        raise KernelInputError(f"format {fmt.name} cannot store into a {state_pool.dtype} pool")
    pos = None if position is None else torch.as_tensor(position)
    state_pool[slot] = round_to_format(S, fmt, sr_seed=sr_seed, positions=pos).to(state_pool.dtype)


def prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias):
    K = q.shape[-1]
    return (
        l2norm(q) * K**-0.5,
        l2norm(k),
        v.to(F64),
        gate(g_raw, A_log, dt_bias),
        torch.sigmoid(beta_raw.to(F64)),
    )


def kda_decode(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    """One token per sequence; pool rows `slots` updated in place (stored as `store` says;
    `positions`: the sequence position of each row's store, for stochastic rounding)."""
    check_kda_args(
        q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=False, allow_f64_pool=True
    )
    qn, kn, vv, g, beta = prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    B, H, _ = q.shape
    o = torch.empty(B, H, v.shape[-1], dtype=F64, device=q.device)
    for b in range(B):
        slot = int(slots[b])
        S = state_pool[slot].to(F64, copy=True)
        for h in range(H):
            S[h], o[b, h] = step(S[h], qn[b, h], kn[b, h], vv[b, h], g[b, h], beta[b, h])
        store(state_pool, slot, S, fmt, sr_seed, None if positions is None else positions[b])
    return o
