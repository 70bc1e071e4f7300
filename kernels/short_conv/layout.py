"""The short conv's output layout, shared by every implementation: [rows, C], or with `groups` > 1
[groups, rows, C // groups], each group of channels a contiguous block (a layer that splits the
channels into equal parts, KDA's q | k | v, then takes each part without a copy)."""

from __future__ import annotations

import torch

from ..errors import KernelInputError


def check_groups(C: int, groups: int) -> int:
    """Channels per group (C when `groups` is 1)."""
    if groups < 1 or C % groups:
        raise KernelInputError(f"groups must be a positive divisor of the {C} channels, got {groups}")
    return C // groups


def grouped(y: torch.Tensor, groups: int) -> torch.Tensor:
    """y [rows, C] in the layout of `groups` (a contiguous copy when groups > 1)."""
    if groups == 1:
        return y
    rows, C = y.shape
    return y.view(rows, groups, C // groups).transpose(0, 1).contiguous()
