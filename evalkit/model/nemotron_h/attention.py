"""The Mamba2 hybrids' attention block (mamba2.md §1, §7): GQA with no norms and no biases, scale
`arch.attention_scale` (head_dim^-0.5; Granite-4.0-H's `attention_multiplier`). NemotronH and
Granite-4.0-H have no RoPE; Bamba rotates the first `rotary_dim` dims of each head, Falcon-H1 all of
them and scales K by its `key_multiplier` (before RoPE, as transformers). K and V live in the
engine's paged cache in the GDN attention's row layout (per KV head [v_g | k_g], after RoPE), so
its per-sequence prefill and paged decode serve it unchanged."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels

from ..batch import ForwardBatch
from ..qwen3_next.attention import GatedAttention
from ..qwen3_next.rope import PartialRope
from .config import NemotronHArch


class NemotronHAttention(nn.Module):
    def __init__(
        self,
        arch: NemotronHArch,
        layer_idx: int,
        dtype: torch.dtype,
        device: torch.device | str,
        rotary_dim: int = 0,
        rope_theta: float = 10000.0,
        key_multiplier: float = 1.0,
    ):
        """`rotary_dim` 0: no RoPE (NemotronH, Granite-4.0-H)."""
        super().__init__()
        self.layer_idx = layer_idx
        self.H, self.Hkv, self.hd = arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        self.group = self.H // self.Hkv
        self.scale = arch.attention_scale
        self.split = [self.H * self.hd, self.Hkv * self.hd, self.Hkv * self.hd]  # q | k | v
        self.rope = PartialRope(rotary_dim, rope_theta, device) if rotary_dim else None
        self.key_multiplier = key_multiplier

        def p(*shape):
            return nn.Parameter(torch.empty(*shape, dtype=dtype, device=device), requires_grad=False)

        self.in_proj = p(sum(self.split), arch.hidden_size)
        self.o_proj = p(arch.hidden_size, self.H * self.hd)

    # reading the cache rows, per-sequence prefill and paged decode: one home
    _kv = GatedAttention._kv
    _attend_per_sequence = GatedAttention._attend_per_sequence
    _attend = GatedAttention._attend
    _decode_paged = GatedAttention._decode_paged

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state, positions=None) -> torch.Tensor:
        """`positions` [n] (absolute token positions) only with RoPE."""
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        q, k, v = F.linear(h, self.in_proj)[:n].split(self.split, dim=-1)
        q, k = q.reshape(n, self.H, self.hd), k.reshape(n, self.Hkv, self.hd)
        if self.key_multiplier != 1.0:
            k = k * self.key_multiplier
        if self.rope is not None:
            cos, sin = self.rope.cos_sin(positions[:n], h.dtype)
            q, k = self.rope.apply(q, cos, sin), self.rope.apply(k, cos, sin)
        pool = state.mla[self.layer_idx]
        row = torch.stack([v.reshape(n, self.Hkv, self.hd), k], dim=2)
        pool.index_copy_(0, batch.mla_slot_mapping, row.reshape(n, -1).to(pool.dtype))
        if batch.is_decode and kernels.use_triton(h):
            o = self._decode_paged(q, pool, batch)
        else:
            o = self._attend_per_sequence(q, pool, batch)
        o = o.reshape(n, self.H * self.hd)
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.o_proj)
