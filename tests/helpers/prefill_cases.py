"""Packed prefill inputs for the kernel tests: sequences of given lengths, a pool whose slots of new
sequences hold NaN (a kernel that reads them shows it), slots, cu_seqlens, has_initial_state."""

from __future__ import annotations

import torch

from evalkit.kernels.testing import KdaInputs, kda_inputs, random_cu_seqlens, random_pool


def prefill_case(
    lengths: list[int], H: int, K: int, V: int, init: list[bool], *, strong_decay: float = 0.2
) -> tuple[KdaInputs, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, pool, slots, cu_seqlens, has_initial_state) of len(lengths) sequences, two spare slots."""
    T, N = sum(lengths), len(lengths)
    S = N + 2
    x = kda_inputs(T, H, K, V, strong_decay=strong_decay)
    pool = random_pool(S, H, K, V, torch.float32)
    slots = torch.randperm(S)[:N].to(torch.int32)
    has_init = torch.tensor(init)
    pool[slots[~has_init].long()] = float("nan")
    return x, pool, slots, random_cu_seqlens(lengths), has_init
