"""Partial rotary embedding of the full-attention layers (gated-deltanet.md §3): the first
`rotary_dim` dims of each head rotate with rotate_half, the rest pass through. cos/sin are computed
in fp32 and cast to the model dtype, as transformers does (Qwen3.5's mRoPE equals this for text)."""

from __future__ import annotations

import torch


class PartialRope:
    def __init__(self, rotary_dim: int, theta: float, device: torch.device | str):
        self.dim = rotary_dim
        exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim
        self.inv_freq = (1.0 / (theta**exponents)).to(device)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [n, rotary_dim] for int positions [n]."""
        freqs = positions[:, None].to(torch.float32) * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def apply(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [n, heads, head_dim] -> the same with the first `dim` dims rotated."""
        rot, rest = x[..., : self.dim], x[..., self.dim :]
        half = self.dim // 2
        rotated = torch.cat([-rot[..., half:], rot[..., :half]], dim=-1)
        out = rot * cos[:, None] + rotated * sin[:, None]
        return torch.cat([out, rest], dim=-1)
