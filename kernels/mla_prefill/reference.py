"""Float64 reference of the MLA prefill attention: a plain masked softmax."""

from __future__ import annotations

import torch

F64 = torch.float64


def causal_mask(m: int, L: int, device=None) -> torch.Tensor:
    """[m, L] bool: query i (absolute position L - m + i) sees keys 0..L - m + i (lower right)."""
    keys = torch.arange(L, device=device)
    return keys[None, :] <= torch.arange(L - m, L, device=device)[:, None]


def mla_prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [H, m, dqk], k [H, L, dqk], v [H, L, dv] -> [H, m, dv] in float64."""
    s = torch.einsum("hmd,hld->hml", q.to(F64), k.to(F64)) * scale
    s = s.masked_fill(~causal_mask(q.shape[1], k.shape[1], q.device), float("-inf"))
    return torch.einsum("hml,hlv->hmv", torch.softmax(s, dim=-1), v.to(F64))
