"""The causal short convolution on the CPU, float32 torch (F.conv1d over [pool | x])."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .layout import check_groups, grouped

F32 = torch.float32


def causal_conv1d_prefill(
    x, weight, conv_pool, slots, cu_seqlens, has_initial_state, bias=None, groups: int = 1
) -> torch.Tensor:
    T, C = x.shape
    check_groups(C, groups)
    W = weight.shape[-1]
    w = weight.reshape(C, 1, W).to(F32)
    y = torch.empty(T, C, dtype=F32, device=x.device)
    cu = cu_seqlens.tolist()
    for n in range(len(cu) - 1):
        bos, eos, slot = cu[n], cu[n + 1], int(slots[n])
        prev = conv_pool[slot].to(F32)
        if not bool(has_initial_state[n]):
            prev = torch.zeros_like(prev)
        window = torch.cat([prev, x[bos:eos].to(F32).T], dim=1)
        b = None if bias is None else bias.to(F32)
        if eos > bos:  # an empty sequence has no output and keeps (or, new, zeroes) its pool row
            y[bos:eos] = F.silu(F.conv1d(window[None], w, b, groups=C)[0]).T
        conv_pool[slot] = window[:, -(W - 1) :].to(conv_pool.dtype)
    return grouped(y.to(x.dtype), groups)


def causal_conv1d_decode(x, weight, conv_pool, slots, bias=None, groups: int = 1) -> torch.Tensor:
    B, C = x.shape
    check_groups(C, groups)
    W = weight.shape[-1]
    idx = slots.long()
    window = torch.cat([conv_pool.index_select(0, idx).to(F32), x.to(F32)[:, :, None]], dim=2)  # [B, C, W]
    acc = (window * weight.reshape(1, C, W).to(F32)).sum(-1)
    y = F.silu(acc if bias is None else acc + bias.to(F32))
    conv_pool[idx] = window[:, :, 1:].to(conv_pool.dtype)
    return grouped(y.to(x.dtype), groups)
