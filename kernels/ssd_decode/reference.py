"""Float64 token-by-token reference of ssd_decode (and the per-token pieces the prefill reference
reuses): the Mamba2 SSD recurrence exactly as mamba2.md §3 writes it, for clarity, not speed.

Per head h (group g = h // (H/G)): dt = softplus(dt_raw + dt_bias), A = -exp(A_log),
S <- exp(dt A) S + dt x (x) B_g  (S [P, N]), y = S C_g + D x (the updated state is read).
No time-step clamp: transformers' decode never clamps (§6), so the model refuses finite limits.
Stores as the KDA reference's (`kda_decode.reference.store`): rounded to fp32 and then the
format's way, a float64 pool receiving the rounded value."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..kda_decode.reference import store
from ..ssd_common import check_ssd_args, heads_of_groups

F64 = torch.float64


def prepared(x, dt_raw, B, C, A_log, dt_bias, D):
    """float64 x [n, H, P], dt [n, H], B/C per head [n, H, N], A [H], D [H]."""
    H = x.shape[1]
    dt = F.softplus(dt_raw.to(F64) + dt_bias.to(F64).reshape(H))
    A = -torch.exp(A_log.to(F64).reshape(H))
    return (
        x.to(F64),
        dt,
        heads_of_groups(B.to(F64), H),
        heads_of_groups(C.to(F64), H),
        A,
        D.to(F64).reshape(H),
    )


def step(S, x, dt, B, C, A, D):
    """One token for one head: S [P, N], x [P], B/C [N], scalars dt, A, D -> (S, y [P])."""
    S = torch.exp(dt * A) * S + dt * torch.outer(x, B)
    return S, S @ C + D * x


def ssd_decode(
    x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    """One token per sequence; pool rows `slots` updated in place (stored as `store` says;
    `positions`: the sequence position of each row's store, for stochastic rounding)."""
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=False, allow_f64_pool=True)
    xx, dt, Bh, Ch, A, DD = prepared(x, dt_raw, B, C, A_log, dt_bias, D)
    n, H, P = x.shape
    y = torch.empty(n, H, P, dtype=F64, device=x.device)
    for b in range(n):
        slot = int(slots[b])
        S = state_pool[slot].to(F64, copy=True)
        for h in range(H):
            S[h], y[b, h] = step(S[h], xx[b, h], dt[b, h], Bh[b, h], Ch[b, h], A[h], DD[h])
        store(state_pool, slot, S, fmt, sr_seed, None if positions is None else positions[b])
    return y
