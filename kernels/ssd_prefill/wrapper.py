"""Python entry of the Triton SSD prefill: checks, tile, launch."""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton

from ..common import check_varlen, resolve_format
from ..errors import KernelInputError
from ..formats import StateFormat
from ..ssd_common import check_ssd_args
from ..triton_launch import (
    block_table,
    check_triton_device,
    device_cu_seqlens,
    format_constexprs,
    launch_key,
    pool_arg,
)
from . import SSD_PREFILL_BLOCK
from .kernel import ssd_prefill_kernel
from .split import ssd_output_kernel, ssd_state_pass_kernel

MIN_DOT = 16  # tl.dot's smallest block dimension


class Tile(NamedTuple):
    """A launch tile: `bt` tokens per block (at most the chunk; rounding stays per chunk), `bp`
    state rows per program, `bn` state columns (the N axis) per step of the
    inner loop (live in registers: [BT, bn] of B and C, [bp, bn] of the state), warps and
    software-pipeline stages."""

    bt: int
    bp: int
    bn: int
    num_warps: int
    num_stages: int


# sm_90 at NemotronH's dims (P=64, N=128), ptxas via compile_check.ssd_prefill_build, registers/stack:
#   bt=64 bp=32 bn=N, 4 warps (the untiled kernel): 255/1464 B;  bt=64 bp=32 bn=32, 8 warps: 255/416;
#   bt=32 bp=32 bn=32, 8 warps: 255/216;  bt=32 bp=64 bn=32, 8 warps: 252/0 (every format: 0).
TILE = Tile(bt=SSD_PREFILL_BLOCK, bp=64, bn=32, num_warps=8, num_stages=2)


def state_rows(tile: Tile, P: int) -> int:
    """BP for a head of P state rows: the tile's, at most P rounded up to a power of 2, >= MIN_DOT."""
    return max(MIN_DOT, min(tile.bp, triton.next_power_of_2(P)))


def state_cols(tile: Tile, N: int) -> int:
    """BN for a state of N columns: the tile's, at most N rounded up to a power of 2, >= MIN_DOT."""
    return max(MIN_DOT, min(tile.bn, triton.next_power_of_2(N)))


VARIANTS = ("walk", "split")  # kernel.py: one sequential program; split.py: state pass + parallel output


def _intra_name(dtype: torch.dtype | None) -> str:
    """The INTRA build constant: "" (no intra-chunk rounding; fp32 rounds nothing), "fp16", "bf16"."""
    names = {None: "", torch.float32: "", torch.float16: "fp16", torch.bfloat16: "bf16"}
    if dtype not in names:
        raise KernelInputError(f"intra_chunk_dtype must be fp32, fp16, bf16 or None, got {dtype}")
    return names[dtype]


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
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
    rounding: str | None = None,
    tile: Tile | None = None,
    variant: str = "walk",
) -> torch.Tensor:
    """Packed variable-length prefill; see `evalkit.kernels.ssd_prefill`. `chunk_size` (a power
    of 2, >= 16) is the kernel's chunk; `rounding` overrides the format's (tests only).
    `cu_seqlens` may be a CPU tensor (read on the host, uploaded once per batch). `variant`:
    "walk" (one sequential program per sequence, head and row block) or "split" (a sequential
    state pass, then every block's output in parallel; the same arithmetic, plus an fp32 state
    per block of tokens in scratch memory)."""
    if variant not in VARIANTS:
        raise KernelInputError(f"ssd_prefill variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=True)
    cu = check_varlen(cu_seqlens, has_initial_state, slots, x.shape[0])
    fmt = resolve_format(fmt, state_pool, positions, slots.numel())
    if chunk_size < MIN_DOT or chunk_size & (chunk_size - 1):
        raise KernelInputError(f"ssd_prefill chunk_size must be a power of 2 >= {MIN_DOT}, got {chunk_size}")
    check_triton_device(ssd_prefill_kernel, x)
    T, H, P = x.shape
    G, N = B.shape[1:]
    x, dt_raw, B, C = (t.contiguous() for t in (x, dt_raw, B, C))
    y = torch.empty(T, H, P, dtype=x.dtype, device=x.device)
    dev = x.device
    if cu_seqlens.device != dev:
        cu_seqlens = device_cu_seqlens(tuple(cu), str(dev))
    tile = tile or TILE
    bp = state_rows(tile, P)
    common = dict(H=H, G=G, P=P, N=N, BT=min(tile.bt, chunk_size), BP=bp, BN=state_cols(tile, N))
    store = dict(**format_constexprs(fmt, rounding), INTRA=_intra_name(intra_chunk_dtype), CHUNK=chunk_size)
    a_log, dt_bias, d_skip = (v.reshape(H).contiguous() for v in (A_log, dt_bias, D))
    slots, init = slots.contiguous(), has_initial_state.to(torch.int32).contiguous()
    pos = positions.contiguous() if positions is not None else slots
    cu_dev = cu_seqlens.to(torch.int32).contiguous()
    if variant == "split":
        starts, ends, offsets, n_blocks = block_table(tuple(cu), common["BT"], str(dev))
        h = torch.empty(
            max(n_blocks, 1), H, P, N, dtype=torch.float32, device=dev
        )  # incoming state per block
        n_cols = triton.cdiv(N, common["BN"])
        ssd_state_pass_kernel[(len(cu) - 1, H, triton.cdiv(P, bp) * n_cols)](
            x, dt_raw, B, a_log, dt_bias, pool_arg(state_pool), h, offsets, slots, pos, cu_dev, init,
            launch_key(fmt, sr_seed), **common, **store, num_warps=tile.num_warps, num_stages=tile.num_stages,
        )  # fmt: skip
        if n_blocks:
            ssd_output_kernel[(n_blocks, H, triton.cdiv(P, bp))](
                x, dt_raw, B, C, a_log, dt_bias, d_skip, h, starts, ends, y, **common,
                num_warps=tile.num_warps, num_stages=tile.num_stages,
            )  # fmt: skip
        return y
    ssd_prefill_kernel[(len(cu) - 1, H, triton.cdiv(P, bp))](
        x,
        dt_raw,
        B,
        C,
        a_log,
        dt_bias,
        d_skip,
        pool_arg(state_pool),
        torch.empty(len(cu) - 1, H, P, N, dtype=torch.float32, device=dev),  # fp32 state between chunks
        slots,
        pos,
        cu_dev,
        init,
        y,
        launch_key(fmt, sr_seed),
        **common,
        **store,
        num_warps=tile.num_warps,
        num_stages=tile.num_stages,
    )
    return y
