"""ssd_decode on the CPU, float32 torch: one recurrent step vectorised over sequences and heads.
Compute is fp32 whatever the pool dtype; stores round the state format's way (`rounding.store_rows`).
`prepare` is shared with the CPU prefill."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common import resolve_format
from ..rounding import store_rows
from ..ssd_common import check_ssd_args, heads_of_groups

F32 = torch.float32


def prepare(x, dt_raw, B, C, A_log, dt_bias, D):
    """fp32 x [n, H, P], dt [n, H], B/C per head [n, H, N], A [H], D [H]."""
    H = x.shape[1]
    dt = F.softplus(dt_raw.to(F32) + dt_bias.to(F32).reshape(H))
    return (
        x.to(F32),
        dt,
        heads_of_groups(B.to(F32), H),
        heads_of_groups(C.to(F32), H),
        -torch.exp(A_log.to(F32).reshape(H)),
        D.to(F32).reshape(H),
    )


def ssd_decode(
    x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=False)
    fmt = resolve_format(fmt, state_pool, positions, x.shape[0])
    xx, dt, Bh, Ch, A, DD = prepare(x, dt_raw, B, C, A_log, dt_bias, D)
    idx = slots.long()
    S = state_pool.index_select(0, idx).to(F32)  # [n, H, P, N]
    S.mul_(torch.exp(dt * A)[..., None, None])
    S.add_((dt[..., None] * xx)[..., None] * Bh[:, :, None, :])
    y = torch.einsum("nhpk,nhk->nhp", S, Ch) + DD[:, None] * xx
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=positions)
    return y.to(x.dtype)
