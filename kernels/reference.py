"""Float64 token-by-token reference of the fused KDA ops (the oracle every test compares against).

Exactly the math of `shared/reference/kimi-linear.md` §2, written for clarity, not speed: one
token, one sequence at a time, everything widened to float64. The only roundings are the ones that
define an arm: the state stored back to the pool, and, for prefill with `intra_chunk_dtype`, the
carried state at each chunk boundary inside a sequence.

Stores: without a format, the exact state is rounded once to the pool dtype (float64 pools keep it
exact); with a format `fmt` (or an fp8 pool), the state is rounded to fp32 and then the format's
way (`rounding.round_to_format`, the kernels' oracle), and a float64 pool receives that rounded
value: the reference of an arm whose stores round, carried exactly in between.

The functions share the kernels' signatures, update the pools in place the same way, and return
float64 outputs (cast them yourself to compare like with like)."""

from __future__ import annotations

import torch

from .common import STATE_DTYPES, check_kda_args, check_varlen, flat_a_log
from .errors import KernelInputError
from .formats import parse_format
from .rounding import round_to_format

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


def _prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias):
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
    qn, kn, vv, g, beta = _prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    B, H, _ = q.shape
    o = torch.empty(B, H, v.shape[-1], dtype=F64, device=q.device)
    for b in range(B):
        slot = int(slots[b])
        S = state_pool[slot].to(F64, copy=True)
        for h in range(H):
            S[h], o[b, h] = step(S[h], qn[b, h], kn[b, h], vv[b, h], g[b, h], beta[b, h])
        store(state_pool, slot, S, fmt, sr_seed, None if positions is None else positions[b])
    return o


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
    """Packed variable-length prefill. Each sequence starts from its slot (or zeros), its final
    state is stored once (as `store` says; `positions[n]`: the position of sequence n's store).
    With `intra_chunk_dtype` the carried state is rounded to that dtype after every `chunk_size`
    tokens that are not the sequence's last."""
    check_kda_args(
        q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=True, allow_f64_pool=True
    )
    check_varlen(cu_seqlens, has_initial_state, slots, q.shape[0])
    qn, kn, vv, g, beta = _prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    T, H, K = q.shape
    V = v.shape[-1]
    o = torch.empty(T, H, V, dtype=F64, device=q.device)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        final = torch.empty(H, K, V, dtype=F64, device=q.device)
        for h in range(H):
            if bool(has_initial_state[n]):
                S = state_pool[slot, h].to(F64)
            else:
                S = torch.zeros(K, V, dtype=F64, device=q.device)
            for t in range(bos, eos):
                S, o[t, h] = step(S, qn[t, h], kn[t, h], vv[t, h], g[t, h], beta[t, h])
                done = t + 1 - bos
                if intra_chunk_dtype is not None and done % chunk_size == 0 and t + 1 < eos:
                    S = S.to(intra_chunk_dtype).to(F64)
            final[h] = S
        store(state_pool, slot, final, fmt, sr_seed, None if positions is None else positions[n])
    return o


def causal_conv1d_prefill(x, weight, conv_pool, slots, cu_seqlens, has_initial_state) -> torch.Tensor:
    """Depthwise causal conv (kernel W) + SiLU over packed sequences. conv_pool [S, C, W-1] holds the
    last W-1 raw inputs of each sequence (zeros before its start); it is updated in place."""
    T, C = x.shape
    W = weight.shape[-1]
    y = torch.empty(T, C, dtype=F64, device=x.device)
    w = weight.reshape(C, W).to(F64)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        prev = conv_pool[slot].to(F64)
        if not bool(has_initial_state[n]):
            prev = torch.zeros_like(prev)
        window = torch.cat([prev, x[bos:eos].to(F64).T], dim=1)  # [C, W-1+L]
        for t in range(eos - bos):
            y[bos + t] = torch.nn.functional.silu((window[:, t : t + W] * w).sum(-1))
        conv_pool[slot] = window[:, -(W - 1) :].to(conv_pool.dtype)
    return y


def causal_conv1d_decode(x, weight, conv_pool, slots) -> torch.Tensor:
    """One new input column per sequence: convolve [pool | x], shift the pool."""
    B, C = x.shape
    W = weight.shape[-1]
    w = weight.reshape(C, W).to(F64)
    y = torch.empty(B, C, dtype=F64, device=x.device)
    for b in range(B):
        slot = int(slots[b])
        window = torch.cat([conv_pool[slot].to(F64), x[b].to(F64)[:, None]], dim=1)
        y[b] = torch.nn.functional.silu((window * w).sum(-1))
        conv_pool[slot] = window[:, 1:].to(conv_pool.dtype)
    return y


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, times weight, times sigmoid(gate); float64 throughout."""
    x = o.to(F64)
    x = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return x * weight.to(F64) * torch.sigmoid(gate.to(F64))
