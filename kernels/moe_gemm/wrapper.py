"""Python entry of the Triton MoE grouped GEMM: checks, the tile, and launch."""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import check_triton_device, interpreting
from .kernel import moe_gemm_kernel


class MoeTile(NamedTuple):
    """A program's block: BM rows of one expert x BN output columns, K read BK at a time. BM 32
    holds one expert's rows of a 512-sequence decode step (4,096 rows over 256 experts, ~16 each)
    in one block, so its weights are read once: with BM 16 the experts past 16 rows read theirs
    twice and the GEMM fell to 68% of copy bandwidth there, against 96-98% with 32, and 98-99% at
    128 sequences with either (H100, results/bench/moe-decode-gemm/)."""

    BM: int = 32
    BN: int = 64
    BK: int = 128
    num_warps: int = 4
    num_stages: int = 4


DEFAULT_TILE = MoeTile()
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def moe_gemm(
    x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, tile: MoeTile | None = None
) -> torch.Tensor:
    """x [R, K] rows sorted by expert, w [E, N, K] the experts' weights, offs [E] int32 the
    cumulative row end of each expert (`torch._grouped_mm`'s offs); returns y [R, N] in x's dtype
    with y[r] = x[r] @ w[e]^T (fp32 sums); rows past offs[-1] (routed to no expert) are zeros."""
    if x.dim() != 2 or w.dim() != 3 or x.shape[1] != w.shape[2]:
        raise KernelInputError(
            f"moe_gemm: x [R, K] and w [E, N, K] expected, got {tuple(x.shape)} and {tuple(w.shape)}"
        )
    if offs.shape != (w.shape[0],) or offs.dtype != torch.int32:
        raise KernelInputError(
            f"moe_gemm: offs must be int32 [E={w.shape[0]}], got {offs.dtype} {tuple(offs.shape)}"
        )
    if x.dtype != w.dtype or x.dtype not in DTYPES:
        raise KernelInputError(
            f"moe_gemm: x and w must share a dtype of fp32/bf16/fp16, got {x.dtype} and {w.dtype}"
        )
    check_triton_device(moe_gemm_kernel, x)
    t = tile or DEFAULT_TILE
    E, N, K = w.shape
    y = torch.empty(x.shape[0], N, dtype=x.dtype, device=x.device)
    if x.shape[0] == 0 or N == 0:
        return y
    moe_gemm_kernel[(triton.cdiv(N, t.BN), E + 1)](
        x.contiguous(), w.contiguous(), y, offs.contiguous(), x.shape[0], N=N, K=K, BM=t.BM, BN=t.BN, BK=t.BK,
        WIDEN=interpreting() and x.dtype != torch.float32, num_warps=t.num_warps, num_stages=t.num_stages,
    )  # fmt: skip
    return y
