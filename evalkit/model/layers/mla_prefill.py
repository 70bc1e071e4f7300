"""Causal attention of one sequence's prefill chunk over its whole cached context (MLA, naive form).

The queries are the last m of the L context positions (lower-right causal alignment: a chunk sees
the prefix of earlier chunks and itself up to its own position). Kimi-Linear's query/key head dim
(nope + rope = 192) differs from its value head dim (128), which keeps PyTorch SDPA off its flash
kernel and on the memory-efficient one: a 128k prompt spent ~20 s in the 7 MLA layers. Padding the
values with zero columns to the query width lets the flash kernel run; the padded output columns are
dropped, and the kept ones are unchanged (each output column is its own weighted sum of one value
column). One call per sequence whose shapes depend only on that sequence's chunk (the scheduler
cuts chunks at fixed multiples), so the result does not depend on the batch around it.

`mode`, the run's `KernelChoice.mla_prefill` ("auto", the default: evalkit's own flash-attention kernel,
`evalkit.kernels.mla_prefill`, for 16-bit tensors on CUDA, which takes the unequal head dims as they
are, and SDPA's own choice elsewhere; "triton": that kernel wherever Triton runs; "flash": the
zero-padded SDPA flash route, the default before the Triton kernel; "sdpa": SDPA's own choice, the path
before issue 15). Measured on the H200 (results/bench/mla-prefill-triton-h200/): the Triton kernel
takes 2.43 s for the attention of 7 layers of a 128k prompt in bf16 against 4.66 s for SDPA flash,
but 0.58x SDPA's speed in fp32, where its tf32x3 products cost more than SDPA's memory-efficient
path: hence "auto". "triton" applies where Triton runs (CUDA, or CPU under
TRITON_INTERPRET=1: `kernels.use_triton`); elsewhere SDPA's plain form runs."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evalkit import kernels
from evalkit.errors import InputError
from evalkit.kernel_choice import MLA_PREFILLS as PREFILL_MODES

FLASH_MAX_HEAD_DIM = 256
FLASH_DTYPES = (torch.float16, torch.bfloat16)


def flash_eligible(q: torch.Tensor, head_dim: int, mode: str) -> bool:
    """Whether the zero-padded flash route applies: chosen, a CUDA tensor in 16-bit, head dim within
    flash's."""
    return mode == "flash" and q.is_cuda and q.dtype in FLASH_DTYPES and head_dim <= FLASH_MAX_HEAD_DIM


def triton_eligible(q: torch.Tensor, mode: str) -> bool:
    """Whether the Triton kernel runs this call: chosen ("triton") and Triton can run on q's device,
    or by default ("auto") for 16-bit tensors on CUDA."""
    if mode == "auto":
        return q.is_cuda and q.dtype in FLASH_DTYPES
    return mode == "triton" and kernels.use_triton(q)


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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    pad: bool | None = None,
    mode: str = "auto",
) -> torch.Tensor:
    """Softmax attention of q [H, m, dqk] over k [H, L, dqk], v [H, L, dv] -> [H, m, dv], the m
    queries being the last m positions. `pad` forces (or forbids) SDPA's equal-head-dim form; by
    default the Triton kernel runs where chosen (`triton_eligible`), else the padded form where the
    flash kernel can take it."""
    if mode not in PREFILL_MODES:
        raise InputError(f"MLA prefill attention {mode!r} is none of {', '.join(PREFILL_MODES)}")
    if pad is None and triton_eligible(q, mode):
        return kernels.triton_implementation("mla_prefill_attention")(q, k, v, scale)
    m, L, dv = q.shape[1], k.shape[1], v.shape[-1]
    if pad is None:
        pad = flash_eligible(q, max(q.shape[-1], dv), mode)
    if pad:
        q, k, v = pad_head_dims(q, k, v)
    mask = _lower_right_mask(m, L, q.device) if m > 1 else None
    o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask, scale=scale)[0]
    return o[..., :dv]
