"""Python entry of the Triton decode step: checks, tile choice per pool dtype, launch."""

from __future__ import annotations

import torch
import triton

from ..common import check_kda_args, flat_a_log, resolve_format, state_dtype_name
from ..formats import StateFormat
from ..triton_launch import check_triton_device, format_constexprs, launch_key, pool_arg
from .kernel import kda_decode_kernel

# (BV, num_warps) per pool dtype: a [K=128, BV] tile of 16 KiB for every 16/32-bit dtype, so 16-bit
# pools move twice the columns per program instead of half the bytes (fp8: the 16-bit tile, until
# the benchmark says otherwise). The benchmark sweeps alternatives.
DECODE_TILES: dict[str, tuple[int, int]] = {
    "fp32": (32, 4),
    "fp16": (64, 4),
    "bf16": (64, 4),
    "fp8_e4m3": (64, 4),
    "fp8_e5m2": (64, 4),
}
VEC = 4  # contiguity along V the compiler may assume: identical layouts for every pool dtype


SR_WARPS = 8  # the hash of stochastic rounding needs registers: twice the threads per tile (no spills)


def decode_config(fmt: StateFormat | torch.dtype, V: int) -> tuple[int, int]:
    """(BV, num_warps) of a launch storing in `fmt` (a bare dtype: round to nearest)."""
    if isinstance(fmt, torch.dtype):
        fmt = StateFormat(state_dtype_name(fmt))
    bv, nw = DECODE_TILES[fmt.storage]
    return min(bv, triton.next_power_of_2(V)), (max(nw, SR_WARPS) if fmt.rounding == "sr" else nw)


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
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    config: tuple[int, int] | None = None,
    rounding: str | None = None,
) -> torch.Tensor:
    """One token per sequence; see `evalkit.kernels.kda_decode`. `config` = (BV, num_warps)
    overrides the tile (the twin check runs the fp32 twin with the checked launch's tile);
    `rounding` overrides the format's rounding (e.g. 'rtz': a deliberately wrong build, tests only)."""
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=False)
    fmt = resolve_format(fmt, state_pool, positions, q.shape[0])
    check_triton_device(kda_decode_kernel, q)
    B, H, K = q.shape
    V = v.shape[-1]
    q, k, v, g_raw, beta_raw = (t.contiguous() for t in (q, k, v, g_raw, beta_raw))
    if out is None:
        out = torch.empty(B, H, V, dtype=q.dtype, device=q.device)
    if B == 0:
        return out
    BV, num_warps = config if config is not None else decode_config(fmt, V)
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
        pool_arg(state_pool),
        slots.contiguous(),
        positions.contiguous() if positions is not None else slots,
        out,
        K**-0.5,
        launch_key(fmt, sr_seed),
        H=H,
        K=K,
        V=V,
        BK=BK,
        BV=BV,
        VEC=min(VEC, BV),
        **format_constexprs(fmt, rounding),
        num_warps=num_warps,
    )
    return out
