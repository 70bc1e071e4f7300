"""Launch of the split-KV absorbed MLA decode attention (see the package docstring)."""

from __future__ import annotations

import torch
import triton

from . import MLA_DECODE_SPLIT as SPLIT  # tokens per split
from .kernel import _mla_combine_kernel, _mla_partial_kernel


def splits_for(context_len: int) -> int:
    return max(1, -(-int(context_len) // SPLIT))


def mla_decode_attention(
    q_lat: torch.Tensor,
    q_rot: torch.Tensor,
    pool: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    block_size: int,
    num_splits: int,
    rows: int | None = None,
    block_n: int = 32,
) -> torch.Tensor:
    """q_lat [B, H, R], q_rot [B, H, P], pool [rows, R+P], block_tables [B, max_blocks] int32,
    context_lens [B] int32 (>= 1, <= num_splits * SPLIT) -> out [B, H, R] fp32 (the attention-
    weighted latent). `rows`: compute only the first rows (the others come back as zeros)."""
    B, H, R = q_lat.shape
    P = q_rot.shape[-1]
    n = B if rows is None else rows
    assert pool.shape[-1] == R + P and pool.stride(-1) == 1
    assert R & (R - 1) == 0 and P & (P - 1) == 0, "latent and rope dims must be powers of two"
    out = (torch.empty if n == B else torch.zeros)(B, H, R, dtype=torch.float32, device=q_lat.device)
    if n == 0:
        return out
    S = int(num_splits)
    acc = torch.empty(n, H, S, R, dtype=torch.float32, device=q_lat.device)
    ml = torch.empty(n, H, S, 2, dtype=torch.float32, device=q_lat.device)
    block_h = 16
    _mla_partial_kernel[(n, triton.cdiv(H, block_h), S)](
        q_lat, q_rot, pool, block_tables, context_lens, acc, ml,
        scale, H, block_size, pool.stride(0), block_tables.stride(0), S,
        R=R, P=P, BLOCK_H=block_h, BLOCK_N=block_n, SPLIT_LEN=SPLIT, num_warps=4,
    )  # fmt: skip
    _mla_combine_kernel[(n, H)](acc, ml, context_lens, out, H, S, R=R, SPLIT_LEN=SPLIT, num_warps=1)
    return out
