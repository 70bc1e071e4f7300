"""Python entry of the Triton short convolution (prefill with a conv-state pool, and decode update)."""

from __future__ import annotations

import functools

import torch
import triton

from ..errors import KernelInputError
from ..triton_launch import check_triton_device, device_cu_seqlens, int32_on_device
from .kernel import conv_decode_kernel, conv_prefill_kernel
from .layout import check_groups

# prefill: a program convolves BT rows of one sequence x BC channels; decode: DECODE_BC channels of
# one sequence. Each output's arithmetic (its taps in order) is the same whatever the tile
# (results/bench/conv-decode/: the decode block is the fastest of its sweep; the prefill tiles
# faster than this one spill registers at 4 warps).
BT, BC = 32, 64
DECODE_BC = 256


def _check(x, weight, conv_pool, slots, n_rows_name: str):
    if x.dim() != 2:
        raise KernelInputError(f"x must be [{n_rows_name}, C], got {tuple(x.shape)}")
    C = x.shape[1]
    W = weight.shape[-1]
    if weight.numel() != C * W:
        raise KernelInputError(f"weight must be [C, W] = [{C}, W], got {tuple(weight.shape)}")
    if conv_pool.dim() != 3 or tuple(conv_pool.shape[1:]) != (C, W - 1) or not conv_pool.is_contiguous():
        raise KernelInputError(
            f"conv_pool must be contiguous [S, C, W-1] = [S, {C}, {W - 1}], got {tuple(conv_pool.shape)}"
        )
    if slots.dim() != 1:
        raise KernelInputError("slots must be a 1-D integer tensor")
    return C, W


def _bias(bias, weight, C: int) -> torch.Tensor:
    """The per-channel bias added before the SiLU (Mamba2's conv1d); the weight stands in when
    there is none (HAS_BIAS=False: never read)."""
    if bias is None:
        return weight
    if bias.numel() != C:
        raise KernelInputError(f"bias must have one entry per channel ({C}), got {bias.numel()}")
    return bias.reshape(C).contiguous()


@functools.lru_cache(maxsize=8)
def _block_table(
    cu: tuple[int, ...], device: str, block_t: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(start, end, sequence) of every block of block_t rows, on the device; cached by the batch's
    cu_seqlens (every conv layer of a forward pass shares them: read, never write)."""
    starts, ends, seqs = [], [], []
    for n, (bos, eos) in enumerate(zip(cu[:-1], cu[1:])):
        for t in range(bos, max(eos, bos + 1), block_t):  # an empty sequence still owns (and keeps) its row
            starts.append(t)
            ends.append(min(t + block_t, eos))
            seqs.append(n)
    return int32_on_device(starts, device), int32_on_device(ends, device), int32_on_device(seqs, device)


def _power_of_two(name: str, n: int) -> int:
    if n < 1 or n & (n - 1):
        raise KernelInputError(f"{name} must be a power of two, got {n}")
    return n


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as the kernels read it: rows any stride apart, channels adjacent."""
    return x if x.stride(1) == 1 else x.contiguous()


def causal_conv1d_prefill(
    x,
    weight,
    conv_pool,
    slots,
    cu_seqlens,
    has_initial_state,
    bias=None,
    groups: int = 1,
    block_t: int | None = None,
    block_c: int | None = None,
) -> torch.Tensor:
    """`block_t` x `block_c`: the rows and channels a program convolves, powers of two (BT, BC)."""
    C, W = _check(x, weight, conv_pool, slots, "T")
    block_t = _power_of_two("block_t", BT if block_t is None else block_t)
    block_c = _power_of_two("block_c", BC if block_c is None else block_c)
    group = check_groups(C, groups)
    check_triton_device(conv_prefill_kernel, x)
    x = _rows(x)
    y = torch.empty(groups, x.shape[0], group, dtype=x.dtype, device=x.device)
    cu = [int(c) for c in cu_seqlens.tolist()]  # a CPU tensor: no device sync
    if len(cu) - 1 != slots.numel() or cu[0] != 0 or cu[-1] != x.shape[0]:
        raise KernelInputError("cu_seqlens must be [N+1] from 0 to T with one slot per sequence")
    key = (tuple(cu), str(x.device))
    starts, ends, seqs = _block_table(*key, block_t)
    conv_prefill_kernel[(starts.numel(), triton.cdiv(C, block_c))](
        x,
        weight.contiguous(),
        _bias(bias, weight, C),
        conv_pool,
        slots.contiguous(),
        has_initial_state.to(torch.int32).contiguous(),
        y,
        starts,
        ends,
        seqs,
        device_cu_seqlens(*key),
        x.stride(0),
        x.shape[0],
        C=C,
        W=W,
        BT=block_t,
        BC=block_c,
        HAS_BIAS=bias is not None,
        BW=triton.next_power_of_2(max(W - 1, 1)),
        GROUP=group,
    )
    return y if groups > 1 else y[0]


def causal_conv1d_decode(
    x, weight, conv_pool, slots, bias=None, groups: int = 1, block_c: int | None = None
) -> torch.Tensor:
    """`block_c`: the channels a program convolves, a power of two (DECODE_BC)."""
    C, W = _check(x, weight, conv_pool, slots, "B")
    block_c = _power_of_two("block_c", DECODE_BC if block_c is None else block_c)
    group = check_groups(C, groups)
    check_triton_device(conv_decode_kernel, x)
    x = _rows(x)
    y = torch.empty(groups, x.shape[0], group, dtype=x.dtype, device=x.device)
    if x.shape[0] == 0:
        return y if groups > 1 else y[0]
    conv_decode_kernel[(x.shape[0], triton.cdiv(C, block_c))](
        x,
        weight.contiguous(),
        _bias(bias, weight, C),
        conv_pool,
        slots.contiguous(),
        y,
        x.stride(0),
        x.shape[0],
        C=C,
        W=W,
        BC=block_c,
        BW=triton.next_power_of_2(max(W - 1, 1)),
        HAS_BIAS=bias is not None,
        GROUP=group,
    )
    return y if groups > 1 else y[0]
