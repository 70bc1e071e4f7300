"""Row tiles of the prefill's [T, H, D] tensors: pointers, masked loads and stores of rows t0..t0+BR-1
(those below t_end) and columns c0..c0+BD-1 (those below D) of one head. Shared by every prefill
variant's kernels (`kernel.py`, `stream.py`)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_ptrs(base, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    """Pointers and mask for rows t0..t0+BR-1 (< t_end), columns c0..c0+BD-1 (< D) of a [T, H, D] tensor."""
    o_r = t0 + tl.arange(0, BR)
    o_d = c0 + tl.arange(0, BD)
    ptr = base + (o_r.to(tl.int64)[:, None] * H + i_h) * D + o_d[None, :]
    mask = (o_r < t_end)[:, None] & (o_d < D)[None, :]
    return ptr, mask


@triton.jit
def load_tile(base, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    """The tile as fp32, 0 outside the rows and columns."""
    ptr, mask = tile_ptrs(base, t0, t_end, H, i_h, D, c0, BR, BD)
    return tl.load(ptr, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def store_tile(base, x, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    """Stores x in the tensor's dtype (rounding to nearest), rows and columns outside left alone."""
    ptr, mask = tile_ptrs(base, t0, t_end, H, i_h, D, c0, BR, BD)
    tl.store(ptr, x.to(base.dtype.element_ty), mask=mask)


@triton.jit
def load_rows_vec(base, rows, m_rows, H, i_h):
    """x[rows, i_h] of a [T, H] tensor as fp32 (0 where not m_rows)."""
    return tl.load(base + rows.to(tl.int64) * H + i_h, mask=m_rows, other=0.0).to(tl.float32)


@triton.jit
def load_tile_as_is(base, t0, t_end, H, i_h, D: tl.constexpr, c0, BR: tl.constexpr, BD: tl.constexpr):
    """The tile in the tensor's own dtype (a bf16 operand stays bf16 for its tensor-core product)."""
    ptr, mask = tile_ptrs(base, t0, t_end, H, i_h, D, c0, BR, BD)
    return tl.load(ptr, mask=mask, other=0.0)


@triton.jit
def chunk_t_ptrs(base, i_c, H, i_h, D: tl.constexpr, c0, BT: tl.constexpr, BD: tl.constexpr):
    """Pointers and mask for columns c0..c0+BD-1 (< D) of one chunk and head of a chunk-transposed
    [chunks, H, D, BT] tensor: a [BD, BT] tile whose rows are the chunk's columns. A tf32 tensor-core
    product reads its first operand from shared memory only with the summed index contiguous, so
    Kd^T of the prefill scan is written in this layout."""
    o_d = c0 + tl.arange(0, BD)
    o_t = tl.arange(0, BT)
    ptr = base + ((i_c.to(tl.int64) * H + i_h) * D + o_d[:, None]) * BT + o_t[None, :]
    return ptr, (o_d < D)[:, None]


@triton.jit
def store_chunk_t(base, x, i_c, H, i_h, D: tl.constexpr, c0, BT: tl.constexpr, BD: tl.constexpr):
    """x [BT, BD] (a chunk's rows, columns c0..) stored transposed into a [chunks, H, D, BT] tensor;
    rows past the chunk's end are stored as they are (zeros where the caller loaded zeros)."""
    ptr, mask = chunk_t_ptrs(base, i_c, H, i_h, D, c0, BT, BD)
    tl.store(ptr, tl.trans(x).to(base.dtype.element_ty), mask=mask)


@triton.jit
def load_chunk_t(base, i_c, H, i_h, D: tl.constexpr, c0, BT: tl.constexpr, BD: tl.constexpr):
    """The [BD, BT] tile of a chunk-transposed tensor in its own dtype, 0 past column D."""
    ptr, mask = chunk_t_ptrs(base, i_c, H, i_h, D, c0, BT, BD)
    return tl.load(ptr, mask=mask, other=0.0)
