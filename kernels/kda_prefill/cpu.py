"""kda_prefill on the CPU, float32 torch: each sequence in chunks with matrix products
(`cpu_chunked.py`, the Triton kernel's WY/UT algebra); the token loop it replaced paid Python
overhead per token. Stores round the state format's way (`rounding.store_rows`)."""

from __future__ import annotations

import torch

from ..common import check_kda_args, check_varlen, resolve_format
from ..kda_decode.cpu import F32, prepare
from ..rounding import store_rows
from .cpu_chunked import chunked_sequence


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
    S = state_pool.index_select(0, idx).to(F32)
    S[~init] = 0.0
    o = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=F32, device=q.device)
    for n in range(int(lens_sorted.numel())):  # each sequence on its own: batch invariant
        bos, eos = int(starts[n]), int(starts[n] + lens_sorted[n])
        rows = slice(bos, eos)
        # inputs prepared per sequence too: SIMD bodies and scalar tails of exp/sigmoid differ in
        # the last bit, so an element's result must not depend on its offset in the packed batch
        qn, kn, vv, g, beta = prepare(q[rows], k[rows], v[rows], g_raw[rows], beta_raw[rows], A_log, dt_bias)
        o[rows] = chunked_sequence(
            qn, kn, vv, g, beta, S[n], chunk_size=chunk_size, intra_chunk_dtype=intra_chunk_dtype
        )
    pos = None if positions is None else positions[order.to(positions.device)]
    store_rows(state_pool, idx, S, fmt, sr_seed=sr_seed, positions=pos)
    return o.to(q.dtype)
