"""ssd_prefill on the CPU, float32 torch: each sequence in chunks of `chunk_size` tokens with
matrix products (transformers' `mamba2_chunk_scan` algebra, mamba2.md §3): within a chunk,
c = cumsum(dt A), y = (C B^T * exp(c_l - c_s) [s <= l]) (dt x) + exp(c) C S0 + D x, and the carried
state S <- exp(c_last) S + sum_s exp(c_last - c_s) dt_s x_s (x) B_s. Each sequence on its own
(batch invariant); the final state is stored the format's way (`rounding.store_rows`)."""

from __future__ import annotations

import torch

from ..common import check_varlen, resolve_format
from ..rounding import store_rows
from ..ssd_common import check_ssd_args
from ..ssd_decode.cpu import F32, prepare


def chunked_sequence(x, dt, B, C, A, D, S, chunk_size: int, intra_chunk_dtype=None) -> torch.Tensor:
    """One sequence: x [L, H, P], dt [L, H], B/C [L, H, N] fp32; S [H, P, N] updated in place
    (rounded to `intra_chunk_dtype` after every chunk but the last, when given)."""
    y = torch.empty_like(x)
    for c0 in range(0, x.shape[0], chunk_size):
        rows = slice(c0, c0 + chunk_size)
        xc, dtc, Bc, Cc = x[rows], dt[rows], B[rows], C[rows]
        cum = torch.cumsum(dtc * A, dim=0)  # [L, H]
        diff = cum[:, None, :] - cum[None, :, :]  # [l, s, H]
        L = xc.shape[0]
        causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()[..., None]
        decay = torch.exp(torch.where(causal, diff, torch.full_like(diff, -float("inf"))))
        scores = torch.einsum("lhn,shn->lsh", Cc, Bc) * decay * dtc[None, :, :]
        yc = torch.einsum("lsh,shp->lhp", scores, xc)
        yc += torch.exp(cum)[..., None] * torch.einsum("lhn,hpn->lhp", Cc, S)
        y[rows] = yc + D[:, None] * xc
        w = torch.exp(cum[-1][None, :] - cum) * dtc  # [L, H]
        S.mul_(torch.exp(cum[-1])[:, None, None])
        S.add_(torch.einsum("lhp,lhn->hpn", xc * w[..., None], Bc))
        if intra_chunk_dtype is not None and c0 + chunk_size < x.shape[0]:
            S.copy_(S.to(intra_chunk_dtype))
    return y


def ssd_prefill(
    x,
    dt_raw,
    B,
    C,
    A_log,
    dt_bias,
    D,
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
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=True)
    check_varlen(cu_seqlens, has_initial_state, slots, x.shape[0])
    fmt = resolve_format(fmt, state_pool, positions, slots.numel())
    cu = [int(c) for c in cu_seqlens.tolist()]
    idx = slots.long()
    S = state_pool.index_select(0, idx).to(F32)
    S[~has_initial_state.bool().to(S.device)] = 0.0
    y = torch.empty(x.shape, dtype=F32, device=x.device)
    for n in range(len(cu) - 1):
        rows = slice(cu[n], cu[n + 1])
        # inputs prepared per sequence: an element's result must not depend on its packed offset
        xx, dt, Bh, Ch, A, DD = prepare(x[rows], dt_raw[rows], B[rows], C[rows], A_log, dt_bias, D)
        y[rows] = chunked_sequence(xx, dt, Bh, Ch, A, DD, S[n], chunk_size, intra_chunk_dtype)
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=positions)
    return y.to(x.dtype)
