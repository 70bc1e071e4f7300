"""Python entry of the Triton decode step: checks, tile choice per pool dtype, launch."""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton

from ..common import check_kda_args, flat_a_log, resolve_format, state_dtype_name
from ..errors import KernelInputError
from ..formats import StateFormat
from ..triton_launch import check_triton_device, format_constexprs, launch_key, multiprocessors, pool_arg
from .kernel import kda_decode_kernel

VEC = 4  # the default contiguity along V the compiler may assume (DecodeTile.VEC)
# the largest VEC whose layout is the same for every pool dtype: Triton gives a thread at most 128
# bits of one load, i.e. 4 fp32 values; at VEC = 8 a 16-bit build holds 8 values per thread along V
# and its fp32 twin 4, so they sum over K in different orders (the twin check would fail)
TWIN_SAFE_VEC = 4
CACHE_HINTS = {  # DecodeTile.cache -> (state load cache modifier, state store cache modifier, eviction)
    "": ("", "", ""),
    "evict_first": ("", "", "evict_first"),
    "stream": (".cg", ".cs", ""),
}

SR_WARPS = 8  # the hash of stochastic rounding needs registers: twice the threads per tile (no spills)


class DecodeTile(NamedTuple):
    """A build of the decode kernel: the tile and the options that only move bytes differently.
    The fp32-twin check runs the fp32 build with the checked launch's DecodeTile, so everything that
    shapes the register layout (BV, num_warps, VEC) lives here, never in the pool dtype. The
    defaults are the kernel as it was before the options (the sweep decides which to turn on)."""

    BV: int
    num_warps: int
    VEC: int = VEC  # contiguity along V (twin-safe up to TWIN_SAFE_VEC)
    even: bool = False  # drop the masks when the dims allow it (K a power of 2, V % BV == 0)
    cache: str = ""  # cache hints for the streamed state: a key of CACHE_HINTS
    v_inner: bool = False  # 1-D grid with the value blocks of a head adjacent
    early: bool = False  # issue the slot and state loads before q/k and their norms
    persist: int = 0  # programs per SM walking the tiles with the next state prefetched (0: one per tile)
    reload: bool = False  # read the state twice (k.S, then the update) instead of holding it widened

    @property
    def twin_safe(self) -> bool:
        """Whether every pool dtype lays this tile out like its fp32 build (see TWIN_SAFE_VEC)."""
        return min(self.VEC, self.BV) <= TWIN_SAFE_VEC

    def constexprs(self, K: int, V: int) -> dict:
        """The kernel's build constants of this tile at head dims K, V (one place for the launch
        and for compile_check's builds)."""
        BK = triton.next_power_of_2(K)
        load_cache, store_cache, evict = CACHE_HINTS[self.cache]
        return dict(
            BK=BK,
            BV=self.BV,
            VEC=min(self.VEC, self.BV),
            EVEN=bool(self.even and K == BK and V % self.BV == 0),
            LOAD_CACHE=load_cache,
            STORE_CACHE=store_cache,
            EVICT=evict,
            V_INNER=bool(self.v_inner),
            EARLY=bool(self.early),
            PERSIST=bool(self.persist),
            RELOAD=bool(self.reload),
        )

    def label(self) -> str:
        """Short name for reports: BV x warps, then the options that are on."""
        opts = [f"vec{self.VEC}" if self.VEC != VEC else "", "even" if self.even else "", self.cache,
                "vinner" if self.v_inner else "", "early" if self.early else "",
                f"persist{self.persist}" if self.persist else "",
                "reload" if self.reload else ""]  # fmt: skip
        return "+".join([f"{self.BV}x{self.num_warps}", *filter(None, opts)])


# The tile per pool dtype. The layout (64 value columns on 4 warps) and the byte options (masks
# off, a head's value blocks side by side in a 1-D grid, the state load issued first) come from the
# H200 sweep (results/bench/decode-sweep-h200/: fastest for fp32, fp16 and bf16 at B = 128 and 512);
# `reload` from the H100 sweep of re-reading builds (results/bench/decode-reload/: the 16-bit steps
# 80-86% -> 84-91% of copy bandwidth, fp32 unchanged at 93-96%; bit-identical). The options move
# bytes only; BV, num_warps and VEC set the layout, which the fp32-twin check and drift's
# recurrent kernel take from here. fp8 keeps the plain tile: not swept.
DECODE_TILES: dict[str, DecodeTile] = {
    "fp32": DecodeTile(64, 4, even=True, v_inner=True, early=True, reload=True),
    "fp16": DecodeTile(64, 4, even=True, v_inner=True, early=True, reload=True),
    "bf16": DecodeTile(64, 4, even=True, v_inner=True, early=True, reload=True),
    "fp8_e4m3": DecodeTile(64, 4),
    "fp8_e5m2": DecodeTile(64, 4),
}


def as_tile(config: tuple | DecodeTile) -> DecodeTile:
    """A DecodeTile from a (BV, num_warps[, VEC, even, cache, v_inner, early, persist, reload]) tuple,
    checked."""
    tile = DecodeTile(*config)
    bv, vec = tile.BV, tile.VEC
    if bv < 1 or bv & (bv - 1) or vec < 1 or vec & (vec - 1) or tile.num_warps < 1 or tile.persist < 0:
        raise KernelInputError(
            f"decode tile needs powers of 2 for BV and VEC, num_warps >= 1, persist >= 0: {config}"
        )
    if tile.persist and tile.reload:
        raise KernelInputError(f"decode tile: persist and reload do not combine (pick one): {config}")
    if tile.cache not in CACHE_HINTS:
        raise KernelInputError(f"decode tile cache must be one of {sorted(CACHE_HINTS)}, got {tile.cache!r}")
    return tile


def decode_config(fmt: StateFormat | torch.dtype, V: int) -> DecodeTile:
    """The tile of a launch storing in `fmt` (a bare dtype: round to nearest)."""
    if isinstance(fmt, torch.dtype):
        fmt = StateFormat(state_dtype_name(fmt))
    tile = DECODE_TILES[fmt.storage]
    nw = max(tile.num_warps, SR_WARPS) if fmt.rounding == "sr" else tile.num_warps
    return tile._replace(BV=min(tile.BV, triton.next_power_of_2(V)), num_warps=nw)


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
    config: tuple | DecodeTile | None = None,
    rounding: str | None = None,
) -> torch.Tensor:
    """One token per sequence; see `evalkit.kernels.kda_decode`. `config` (a DecodeTile or its
    tuple, e.g. (BV, num_warps)) overrides the tile (the twin check runs the fp32 twin with the
    checked launch's tile); `rounding` overrides the format's rounding (e.g. 'rtz': a deliberately
    wrong build, tests only)."""
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
    tile = as_tile(config) if config is not None else decode_config(fmt, V)
    NV = triton.cdiv(V, tile.BV)
    n_tiles = B * H * NV
    if tile.persist:
        grid = (min(n_tiles, tile.persist * multiprocessors(q.device)),)
    else:
        grid = (n_tiles,) if tile.v_inner else (B * H, NV)
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
        n_tiles,
        H=H,
        K=K,
        V=V,
        **tile.constexprs(K, V),
        **format_constexprs(fmt, rounding),
        num_warps=tile.num_warps,
    )
    return out
