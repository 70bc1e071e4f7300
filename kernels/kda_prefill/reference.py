"""Float64 token-by-token reference of the packed variable-length KDA prefill: the decode
reference's step, one token at a time."""

from __future__ import annotations

import torch

from ..common import check_kda_args, check_varlen
from ..kda_decode.reference import F64, prepared, step, store


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
    qn, kn, vv, g, beta = prepared(q, k, v, g_raw, beta_raw, A_log, dt_bias)
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
