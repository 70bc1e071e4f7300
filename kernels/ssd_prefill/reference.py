"""Float64 token-by-token reference of the packed variable-length SSD prefill: the decode
reference's step, one token at a time."""

from __future__ import annotations

import torch

from ..common import check_varlen
from ..kda_decode.reference import store
from ..ssd_common import check_ssd_args
from ..ssd_decode.reference import F64, prepared, step


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
    """Packed variable-length prefill. Each sequence starts from its slot (or zeros); its final
    state is stored once (as `store` says; `positions[n]`: the position of sequence n's store).
    With `intra_chunk_dtype` the carried state is rounded to that dtype after every `chunk_size`
    tokens that are not the sequence's last (as the KDA prefill's)."""
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=True, allow_f64_pool=True)
    check_varlen(cu_seqlens, has_initial_state, slots, x.shape[0])
    xx, dt, Bh, Ch, A, DD = prepared(x, dt_raw, B, C, A_log, dt_bias, D)
    T, H, P = x.shape
    y = torch.empty(T, H, P, dtype=F64, device=x.device)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        final = torch.empty(state_pool.shape[1:], dtype=F64, device=x.device)
        for h in range(H):
            if bool(has_initial_state[n]):
                S = state_pool[slot, h].to(F64)
            else:
                S = torch.zeros(final.shape[1:], dtype=F64, device=x.device)
            for t in range(bos, eos):
                S, y[t, h] = step(S, xx[t, h], dt[t, h], Bh[t, h], Ch[t, h], A[h], DD[h])
                done = t + 1 - bos
                if intra_chunk_dtype is not None and done % chunk_size == 0 and t + 1 < eos:
                    S = S.to(intra_chunk_dtype).to(F64)
            final[h] = S
        store(state_pool, slot, final, fmt, sr_seed, None if positions is None else positions[n])
    return y
