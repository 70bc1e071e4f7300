"""G, the within-chunk inclusive cumsum of the KDA gate, and e^{G_last}: the one home of G for
every prefill variant (`stream.py`'s prep launch, `kernel.py`'s first launch)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import kda_gate
from .tiles import store_tile, tile_ptrs


@triton.jit
def chunk_gate_cumsum(
    g_raw,
    a_log,
    dt_bias,
    G,
    EGl,
    i_c,
    t0,
    t1,
    H,
    i_h,
    K: tl.constexpr,
    c0,
    BT: tl.constexpr,
    BK: tl.constexpr,
    APPROX_GATE: tl.constexpr = False,
):
    """Columns c0..c0+BK-1 of the chunk's G (within-chunk cumsum of the gate, stored) and of
    e^{G_last} (stored into EGl); returns that G [BT, BK] and G_last [BK]. The one home of G for
    every prefill variant (the columns are independent: a caller may split them over programs)."""
    o_k = c0 + tl.arange(0, BK)
    ptr, mask = tile_ptrs(g_raw, t0, t1, H, i_h, K, c0, BT, BK)
    b_gr = tl.load(ptr, mask=mask, other=0.0).to(tl.float32)
    b_bias = tl.load(dt_bias + i_h * K + o_k, mask=o_k < K, other=0.0).to(tl.float32)
    b_a = tl.load(a_log + i_h).to(tl.float32)
    b_g = tl.cumsum(tl.where(mask, kda_gate(b_gr, b_bias[None, :], b_a, APPROX_GATE), 0.0), axis=0)
    store_tile(G, b_g, t0, t1, H, i_h, K, c0, BT, BK)
    o_t = tl.arange(0, BT)
    b_glast = tl.sum(tl.where((o_t == t1 - 1 - t0)[:, None], b_g, 0.0), axis=0)
    tl.store(EGl + (i_c.to(tl.int64) * H + i_h) * K + o_k, tl.exp(b_glast), mask=o_k < K)
    return b_g, b_glast
