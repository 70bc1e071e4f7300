"""Gated DeltaNet layer (gated-deltanet.md §2) on evalkit's KDA kernels.

GDN is KDA with one decay per value head instead of one per channel: the KDA kernels compute
g = -exp(A_log[h]) * softplus(g_raw[h, k] + dt_bias[h, k]); with the per-head `a` broadcast over
the key dim as g_raw and dt_bias repeated K times, that is GDN's g for every channel, so
S <- exp(g) S is the scalar decay. Beta, the L2 norms, the q scale and the delta rule are shared.
Key heads are fewer than value heads: q and k are repeat_interleaved (value head j reads key head
j // r) before the kernel, so every state format and arm of the kernels serves GDN unchanged.

Projections are one fused GEMM with rows [q | k | v | z | b | a] (Qwen3-Next's per-key-head
grouped in_proj_qkvz/in_proj_ba are reordered to this at load). Output: per-head RMSNorm x
silu(z) (`silu_gated_rms_norm`), then out_proj."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernel_choice import KernelChoice

from ..batch import ForwardBatch
from ..layers.kda import KDAttention
from .config import GDNArch
from .norms import silu_gated_rms_norm


def per_channel(x: torch.Tensor, K: int) -> torch.Tensor:
    """A per-head value [n, H] repeated over the key dim: [n, H, K]."""
    return x[:, :, None].expand(*x.shape, K).contiguous()


def as_kda_gate(a: torch.Tensor, dt_bias: torch.Tensor, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GDN's per-head gate input a [n, H] and dt_bias [H] as the KDA kernels' per-channel
    g_raw [n, H, K] and dt_bias [H*K]: the kernels' gate is then GDN's on every channel."""
    return per_channel(a, K), per_channel(dt_bias.reshape(1, -1), K).reshape(-1)


class GatedDeltaNet(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels (KDAttention's prefill reads it)

    def __init__(self, arch: GDNArch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.layer_idx = layer_idx
        self.Hk, self.Hv = arch.linear_num_key_heads, arch.linear_num_value_heads
        self.dk, self.dv = arch.linear_key_head_dim, arch.linear_value_head_dim
        self.r = self.Hv // self.Hk
        self.Dk, self.Dv = self.Hk * self.dk, self.Hv * self.dv
        self.C = 2 * self.Dk + self.Dv
        self.eps = arch.rms_norm_eps
        self.split = [self.C, self.Dv, self.Hv, self.Hv]  # qkv | z | b | a

        def p(*shape, dt=dtype):
            return nn.Parameter(torch.empty(*shape, dtype=dt, device=device), requires_grad=False)

        self.in_proj = p(sum(self.split), arch.hidden_size)
        self.conv_weight = p(self.C, arch.linear_conv_kernel_dim)
        self.A_log = p(self.Hv, dt=torch.float32)  # rounded to the model dtype on load, like transformers
        self.dt_bias = p(self.Hv * self.dk, dt=torch.float32)  # per head, repeated over the key dim
        self.norm = p(self.dv)
        self.out_proj = p(arch.hidden_size, self.Dv)

    def _value_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[n, Hk, d] -> [n, Hv, d], value head j reading key head j // r (repeat_interleave, as an
        expand: no host sync, so CUDA graphs can capture it)."""
        n, _, d = x.shape
        return x[:, :, None].expand(n, self.Hk, self.r, d).reshape(n, self.Hv, d)

    # decode or (packed or per-sequence) prefill kernel calls, and how the state is stored: one home
    _recurrence = KDAttention._recurrence
    _prefill = KDAttention._prefill
    _store_args = KDAttention._store_args
    _variant = KDAttention._variant

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        qkv, z, b, a = F.linear(h, self.in_proj)[:n].split(self.split, dim=-1)
        conv_pool, pool = state.conv[self.layer_idx], state.kda[self.layer_idx]
        qkv = qkv.contiguous()
        if batch.is_decode:
            y = kernels.causal_conv1d_decode(qkv, self.conv_weight, conv_pool, batch.slots)
        else:
            y = kernels.causal_conv1d_prefill(
                qkv,
                self.conv_weight,
                conv_pool,
                batch.slots,
                batch.cu_seqlens_readable,
                batch.has_initial_state,
            )
        q, k, v = y.split([self.Dk, self.Dk, self.Dv], dim=-1)
        q, k = (self._value_heads(t.reshape(n, self.Hk, self.dk)) for t in (q, k))
        v = v.reshape(n, self.Hv, self.dv).contiguous()
        g_raw = per_channel(a, self.dk)
        beta_raw = b.contiguous()
        o = self._recurrence(q, k, v, g_raw, beta_raw, pool, batch, state)
        o = silu_gated_rms_norm(o, z.reshape(n, self.Hv, self.dv), self.norm, self.eps).reshape(n, self.Dv)
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.out_proj)
