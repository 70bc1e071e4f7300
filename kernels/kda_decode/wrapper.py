"""Python entry of the Triton decode step: checks, tile choice per pool dtype, launch."""

from __future__ import annotations

import torch
import triton

from ..common import check_kda_args, flat_a_log
from ..triton_launch import check_triton_device, rounding_flag, state_constexpr
from .kernel import kda_decode_kernel

# (BV, num_warps) per pool dtype: a [K=128, BV] tile of 16 KiB for every dtype, so 16-bit pools move
# twice the columns per program instead of half the bytes. The benchmark sweeps alternatives.
DECODE_TILES: dict[str, tuple[int, int]] = {"fp32": (32, 4), "fp16": (64, 4), "bf16": (64, 4)}
VEC = 4  # contiguity along V the compiler may assume: identical layouts for every pool dtype


def decode_config(pool_dtype: torch.dtype, V: int) -> tuple[int, int]:
    bv, nw = DECODE_TILES[state_constexpr(torch.empty(0, dtype=pool_dtype))]
    return min(bv, triton.next_power_of_2(V)), nw


def kda_decode(
    q,
    k,
    v,
    g_raw,
    beta_raw,
    A_log,
    dt_bias,
    state_pool,
    slots,
    *,
    out: torch.Tensor | None = None,
    config: tuple[int, int] | None = None,
    rounding: str = "rtne",
) -> torch.Tensor:
    """One token per sequence; see `evalkit.kernels.kda_decode`. `config` = (BV, num_warps)
    overrides the tile (the twin check runs the fp32 twin with the 16-bit launch's tile);
    `rounding='rtz'` builds the deliberately wrong truncating variant (tests only)."""
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=False)
    check_triton_device(kda_decode_kernel, q)
    B, H, K = q.shape
    V = v.shape[-1]
    q, k, v, g_raw, beta_raw = (t.contiguous() for t in (q, k, v, g_raw, beta_raw))
    if out is None:
        out = torch.empty(B, H, V, dtype=q.dtype, device=q.device)
    if B == 0:
        return out
    BV, num_warps = config if config is not None else decode_config(state_pool.dtype, V)
    BK = triton.next_power_of_2(K)
    grid = (B * H, triton.cdiv(V, BV))
    kda_decode_kernel[grid](
        q,
        k,
        v,
        g_raw,
        beta_raw,
        flat_a_log(A_log, H).contiguous(),
        dt_bias.contiguous(),
        state_pool,
        slots.contiguous(),
        out,
        K**-0.5,
        H=H,
        K=K,
        V=V,
        BK=BK,
        BV=BV,
        VEC=min(VEC, BV),
        STATE_DTYPE=state_constexpr(state_pool),
        ROUND_RTZ=rounding_flag(rounding),
        num_warps=num_warps,
    )
    return out
