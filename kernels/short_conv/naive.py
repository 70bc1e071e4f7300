"""Plain torch form of the causal short convolution for one sequence: F.conv1d over [prefix | x]
(transformers' formulation), returning the outputs and the new W-1 column prefix."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def naive_conv_sequence(x: torch.Tensor, weight: torch.Tensor, prefix: torch.Tensor):
    """x [L, C], weight [C, W], prefix [C, W-1] (zeros for a new sequence) -> (y [L, C], new prefix)."""
    L, C = x.shape
    W = weight.shape[-1]
    window = torch.cat([prefix, x.T.to(prefix.dtype)], dim=1)[None]  # [1, C, W-1+L]
    y = F.silu(F.conv1d(window, weight.reshape(C, 1, W).to(prefix.dtype), groups=C))[0].T
    return y, window[0, :, window.shape[-1] - (W - 1) :]
