"""Causal attention of one sequence's prefill chunk over its whole cached context (MLA, naive form).

The queries are the last m of the L context positions (lower-right causal alignment: a chunk sees
the prefix of earlier chunks and itself up to its own position). Kimi-Linear's query/key head dim
(nope + rope = 192) differs from its value head dim (128), which keeps PyTorch SDPA off its flash
kernel and on the memory-efficient one: a 128k prompt spent ~20 s in the 7 MLA layers. Padding the
values with zero columns to the query width lets the flash kernel run; the padded output columns are
dropped, and the kept ones are unchanged (each output column is its own weighted sum of one value
column). One call per sequence whose shapes depend only on that sequence's chunk (the scheduler
cuts chunks at fixed multiples), so the result does not depend on the batch around it.

`PREFILL_ATTENTION` ("flash", the default, or "sdpa": SDPA's own choice, the path before issue 15)
exists so a benchmark can time both in one process; env `EVALKIT_MLA_PREFILL` sets it at import."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

PREFILL_ATTENTION = os.environ.get("EVALKIT_MLA_PREFILL", "flash")
FLASH_MAX_HEAD_DIM = 256
FLASH_DTYPES = (torch.float16, torch.bfloat16)


def flash_eligible(q: torch.Tensor, head_dim: int) -> bool:
    """Whether the zero-padded flash route applies: a CUDA tensor in 16-bit, head dim within flash's."""
    return (
        PREFILL_ATTENTION == "flash"
        and q.is_cuda
        and q.dtype in FLASH_DTYPES
        and head_dim <= FLASH_MAX_HEAD_DIM
    )


def _lower_right_mask(m: int, L: int, device: torch.device):
    if device.type == "cuda":
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(m, L)
    pos = torch.arange(L - m, L, device=device)
    return torch.arange(L, device=device)[None, :] <= pos[:, None]


def pad_head_dims(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """q/k/v padded with zero columns to one head dim (scores and kept outputs are unchanged)."""
    d = max(q.shape[-1], v.shape[-1])
    if q.shape[-1] < d:
        q, k = F.pad(q, (0, d - q.shape[-1])), F.pad(k, (0, d - k.shape[-1]))
    if v.shape[-1] < d:
        v = F.pad(v, (0, d - v.shape[-1]))
    return q, k, v


def causal_prefill_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, pad: bool | None = None
) -> torch.Tensor:
    """Softmax attention of q [H, m, dqk] over k [H, L, dqk], v [H, L, dv] -> [H, m, dv], the m
    queries being the last m positions. `pad` forces (or forbids) the equal-head-dim form; by default
    it is used where the flash kernel can take it."""
    m, L, dv = q.shape[1], k.shape[1], v.shape[-1]
    if pad is None:
        pad = flash_eligible(q, max(q.shape[-1], dv))
    if pad:
        q, k, v = pad_head_dims(q, k, v)
    mask = _lower_right_mask(m, L, q.device) if m > 1 else None
    o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask, scale=scale)[0]
    return o[..., :dv]
