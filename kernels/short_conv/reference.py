"""Float64 reference of the causal short convolution, one output column at a time."""

from __future__ import annotations

import torch

from .layout import check_groups, grouped

F64 = torch.float64


def causal_conv1d_prefill(
    x, weight, conv_pool, slots, cu_seqlens, has_initial_state, bias=None, groups: int = 1
) -> torch.Tensor:
    """Depthwise causal conv (kernel W) + SiLU over packed sequences. conv_pool [S, C, W-1] holds the
    last W-1 raw inputs of each sequence (zeros before its start); it is updated in place. `bias` [C]
    (Mamba2's conv1d has one) is added before the SiLU."""
    T, C = x.shape
    check_groups(C, groups)
    W = weight.shape[-1]
    y = torch.empty(T, C, dtype=F64, device=x.device)
    w = weight.reshape(C, W).to(F64)
    b = torch.zeros(C, dtype=F64, device=x.device) if bias is None else bias.to(F64)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        prev = conv_pool[slot].to(F64)
        if not bool(has_initial_state[n]):
            prev = torch.zeros_like(prev)
        window = torch.cat([prev, x[bos:eos].to(F64).T], dim=1)  # [C, W-1+L]
        for t in range(eos - bos):
            y[bos + t] = torch.nn.functional.silu((window[:, t : t + W] * w).sum(-1) + b)
        conv_pool[slot] = window[:, -(W - 1) :].to(conv_pool.dtype)
    return grouped(y, groups)


def causal_conv1d_decode(x, weight, conv_pool, slots, bias=None, groups: int = 1) -> torch.Tensor:
    """One new input column per sequence: convolve [pool | x], shift the pool."""
    B, C = x.shape
    check_groups(C, groups)
    W = weight.shape[-1]
    w = weight.reshape(C, W).to(F64)
    bb = torch.zeros(C, dtype=F64, device=x.device) if bias is None else bias.to(F64)
    y = torch.empty(B, C, dtype=F64, device=x.device)
    for b in range(B):
        slot = int(slots[b])
        window = torch.cat([conv_pool[slot].to(F64), x[b].to(F64)[:, None]], dim=1)
        y[b] = torch.nn.functional.silu((window * w).sum(-1) + bb)
        conv_pool[slot] = window[:, 1:].to(conv_pool.dtype)
    return grouped(y, groups)
