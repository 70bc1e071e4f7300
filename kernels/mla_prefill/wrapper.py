"""Python entry of the Triton MLA prefill attention: input checks, head-dim split, tile choice, one launch."""

from __future__ import annotations

import math

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import check_triton_device, interpreting
from .kernel import mla_prefill_kernel

MAX_HEAD_DIM = 256
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LOG2_E = 1.4426950408889634
# (BLOCK_M, BLOCK_N, num_warps, num_stages) per input dtype, for dqk = 192 / dv = 128 on sm_90:
# no register spills, within shared memory, loads pipelined (kernels/compile_check.py; 16-bit:
# 170 registers, 168 KiB; fp32, whose tf32x3 split doubles every operand: 234 registers, 132 KiB;
# (64, 32, 4, 2) spills). The 16-bit tile is the fastest of the H200 tile sweep
# (results/bench/mla-prefill-triton-h200/, the attention of 7 layers of a 128k prompt): 2.43 s,
# against 2.90 s with two stages, 2.49 for (128, 128, 8, 2), 2.86 for (64, 64, 4, 2), 3.5-4.7 with one.
TILES: dict[torch.dtype, tuple[int, int, int, int]] = {
    torch.bfloat16: (128, 64, 8, 3),
    torch.float16: (128, 64, 8, 3),
    torch.float32: (64, 16, 4, 2),
}
# Chunks of the query/key head dim: 192 = 3 x 64, no padded columns; narrow chunks keep the tf32x3
# split (big and small halves of each operand) of the fp32 build within the registers.
HEAD_CHUNK = 64
MAX_CHUNKS = 4  # the kernel's q0..q3: MAX_HEAD_DIM / HEAD_CHUNK
DOT_PRECISION = {torch.float32: "tf32x3"}  # 16-bit dots ignore it: "tf32" is Triton's default


def head_dim_chunks(d: int) -> tuple[int, int]:
    """(DC, NC): the query/key head dim as NC <= 4 chunks of DC columns (a power of two >= 16,
    tl.dot's minimum; the last chunk masked where NC * DC > d). 192 -> (64, 3), 24 -> (32, 1)."""
    dc = min(HEAD_CHUNK, max(16, triton.next_power_of_2(d)))
    nc = triton.cdiv(d, dc)
    assert nc <= MAX_CHUNKS, f"head dim {d} needs {nc} chunks; the kernel has {MAX_CHUNKS}"
    return dc, nc


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise KernelInputError(
                f"mla_prefill_attention: {name} must be 3-D (q [H, m, dqk], k [H, L, dqk], "
                f"v [H, L, dv]), got {got}"
            )
    (H, m, dqk), (L, dv) = q.shape, (k.shape[1], v.shape[2])
    if k.shape != (H, L, dqk) or v.shape[:2] != (H, L):
        raise KernelInputError(
            "mla_prefill_attention: shapes do not fit q [H, m, dqk], k [H, L, dqk], v [H, L, dv]: "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if m > L:
        raise KernelInputError(f"mla_prefill_attention: {m} queries but only {L} keys (need m <= L)")
    if not 1 <= dqk <= MAX_HEAD_DIM or not 1 <= dv <= MAX_HEAD_DIM:
        raise KernelInputError(
            f"mla_prefill_attention: head dims 1..{MAX_HEAD_DIM} supported, got dqk={dqk}, dv={dv}"
        )
    if not q.dtype == k.dtype == v.dtype or q.dtype not in DTYPES:
        raise KernelInputError(
            "mla_prefill_attention: q, k, v must share one dtype of float16, bfloat16, float32; "
            f"got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if not q.device == k.device == v.device:
        raise KernelInputError(
            f"mla_prefill_attention: q, k, v on different devices: {q.device}, {k.device}, {v.device}"
        )
    if not math.isfinite(float(scale)):
        raise KernelInputError(f"mla_prefill_attention: scale must be finite, got {scale}")


def mla_prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    *,
    out: torch.Tensor | None = None,
    tile: tuple[int, int, int, int] | None = None,
    dot_precision: str | None = None,
) -> torch.Tensor:
    """Softmax attention of q [H, m, dqk] over k [H, L, dqk], v [H, L, dv] -> [H, m, dv] in q's
    dtype, the m queries being the last m of the L positions (lower-right causal). Any strides
    with a contiguous last dim are read in place. `out`: a [H, m, dv] tensor to write (tests);
    `tile`: (BLOCK_M, BLOCK_N, num_warps, num_stages) instead of TILES; `dot_precision`: for fp32
    inputs, "tf32x3" (default) or "ieee"."""
    _check(q, k, v, scale)
    check_triton_device(mla_prefill_kernel, q)
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    (H, m, dqk), L, dv = q.shape, k.shape[1], v.shape[2]
    if out is None:
        out = torch.empty(H, m, dv, dtype=q.dtype, device=q.device)
    elif out.shape != (H, m, dv) or out.dtype != q.dtype or out.stride(-1) != 1:
        raise KernelInputError(
            f"mla_prefill_attention: out must be {(H, m, dv)} {q.dtype} with a contiguous last dim, "
            f"got {tuple(out.shape)} {out.dtype}"
        )
    if m == 0 or H == 0:
        return out
    block_m, block_n, warps, stages = tile or TILES[q.dtype]
    block_m = min(block_m, max(16, triton.next_power_of_2(m)))  # a short chunk: one small tile
    dc, nc = head_dim_chunks(dqk)
    block_dv = max(16, triton.next_power_of_2(dv))
    prec = dot_precision or DOT_PRECISION.get(q.dtype, "tf32")
    mla_prefill_kernel[(triton.cdiv(m, block_m), H)](
        q, k, v, out, float(scale) * LOG2_E, m, L,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        D=dqk, DC=dc, NC=nc, DV=dv, BLOCK_DV=block_dv, BLOCK_M=block_m, BLOCK_N=block_n,
        MASK_D=dc * nc != dqk, MASK_DV=block_dv != dv, DOT_PREC=prec,
        WIDEN=interpreting() and q.dtype == torch.bfloat16,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out
