"""Gated full attention of the Qwen GDN family (gated-deltanet.md §3): GQA with zero-centred q/k
norms, partial RoPE and a sigmoid output gate (q_proj gives per head [q | gate]).

K and V live in the engine's paged cache (the pool the MLA layers use, one row per token): per KV
head g the row holds [v_g | k_g], after norm and RoPE. Prefill (and decode on CPU) gathers a
sequence's rows and runs softmax attention per sequence, as transformers does. Decode on GPU
reuses the paged split-KV MLA decode kernel once per KV head: with a zero latent query and q as
its rope query, its scores are q.k and its output softmax @ v, so a CUDA graph of fixed width
replays it whatever the context lengths (batch invariant, like MLA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernels import MLA_DECODE_SPLIT

from ..batch import ForwardBatch
from ..store_rounds import new_row_cuts
from .config import GDNArch
from .norms import zero_centred_rms_norm
from .rope import PartialRope


class GatedAttention(nn.Module):
    def __init__(self, arch: GDNArch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.layer_idx = layer_idx
        self.H, self.Hkv, self.hd = arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        self.group = self.H // self.Hkv
        self.scale = self.hd**-0.5
        self.eps = arch.rms_norm_eps
        self.split = [2 * self.H * self.hd, self.Hkv * self.hd, self.Hkv * self.hd]  # q+gate | k | v
        self.rope = PartialRope(arch.rotary_dim, arch.rope_theta, device)

        def p(*shape):
            return nn.Parameter(torch.empty(*shape, dtype=dtype, device=device), requires_grad=False)

        self.in_proj = p(sum(self.split), arch.hidden_size)
        self.q_norm = p(self.hd)
        self.k_norm = p(self.hd)
        self.o_proj = p(arch.hidden_size, self.H * self.hd)

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state, positions: torch.Tensor) -> torch.Tensor:
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        qg, k, v = F.linear(h, self.in_proj)[:n].split(self.split, dim=-1)
        q, gate = qg.view(n, self.H, 2 * self.hd).split(self.hd, dim=-1)
        q = zero_centred_rms_norm(q, self.q_norm, self.eps)
        k = zero_centred_rms_norm(k.view(n, self.Hkv, self.hd), self.k_norm, self.eps)
        cos, sin = self.rope.cos_sin(positions[:n], h.dtype)
        q, k = self.rope.apply(q, cos, sin), self.rope.apply(k, cos, sin)
        pool = state.mla[self.layer_idx]
        row = torch.stack([v.view(n, self.Hkv, self.hd), k], dim=2).reshape(n, -1)
        pool.index_copy_(0, batch.mla_slot_mapping, row.to(pool.dtype))
        if batch.is_decode and kernels.use_triton(h):
            o = self._decode_paged(q, pool, batch)
        else:
            o = self._attend_per_sequence(q, pool, batch)
        o = o.reshape(n, self.H * self.hd) * torch.sigmoid(gate.reshape(n, self.H * self.hd))
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.o_proj)

    def _kv(self, rows: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [H, L, hd] of cached rows (each KV head repeated for its query heads)."""
        cached = rows.to(dtype).view(-1, self.Hkv, 2, self.hd)
        v, k = cached[:, :, 0], cached[:, :, 1]
        return (t.transpose(0, 1).repeat_interleave(self.group, dim=0) for t in (k, v))

    def _attend_per_sequence(self, q: torch.Tensor, pool: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        """Each sequence's new rows over its context (gathered once), one store chunk of rows per call."""
        out = torch.zeros_like(q)
        start = 0
        for rows, m in zip(batch.context_rows, batch.new_lens):
            k, v = self._kv(pool[rows], q.dtype)
            L = k.shape[1]
            for i, j, b in new_row_cuts(L, m, batch.store_chunk):
                qi = q[start + i : start + j].transpose(0, 1)  # [H, j - i, hd]
                out[start + i : start + j] = self._attend(qi, k[:, :b], v[:, :b])[0].transpose(0, 1)
            start += m
        return out

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """SDPA of q [H, m, hd], the last m of the L positions of k, v [H, L, hd] (lower-right causal)."""
        m, L = q.shape[1], k.shape[1]
        mask = None
        if m > 1 and q.is_cuda:  # no dense [m, L] mask at long contexts
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(m, L)
        elif m > 1:
            pos = torch.arange(L - m, L, device=q.device)
            mask = torch.arange(L, device=q.device)[None, :] <= pos[:, None]
        return F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask, scale=self.scale)

    def _decode_paged(self, q: torch.Tensor, pool: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        mla_decode_attention = kernels.triton_implementation("mla_decode_attention")
        B = q.shape[0]
        per_head = pool.view(pool.shape[0], self.Hkv, 2 * self.hd)
        zeros = q.new_zeros(B, self.group, self.hd)
        splits = batch.mla_splits or -(-int(batch.context_lens.max()) // MLA_DECODE_SPLIT)  # host sync
        outs = []
        for g in range(self.Hkv):
            q_g = q[:, g * self.group : (g + 1) * self.group].contiguous()
            o = mla_decode_attention(
                zeros,
                q_g,
                per_head[:, g],
                batch.block_tables,
                batch.context_lens,
                self.scale,
                batch.block_size,
                splits,
                rows=batch.decode_rows,
            )
            outs.append(o.to(q.dtype))
        return torch.cat(outs, dim=1)
