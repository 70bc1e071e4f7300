"""Multi-head latent attention without rotary embeddings (kimi-linear.md §4).

Per token the cache holds the normalised latent c [kv_lora_rank] and the shared k_rot
[qk_rope_head_dim] (one row of a paged pool, `ForwardBatch.mla_slot_mapping`). Prefill (and decode
on CPU) expands the whole cached context with kv_b_proj and runs softmax attention per sequence,
as transformers does (`mla_prefill`: on the GPU in 16-bit evalkit's Triton flash-attention kernel,
`kernels/mla_prefill`, else SDPA; `KernelChoice.mla_prefill` picks another). Decode on GPU absorbs
kv_b_proj into the query and the output (exact: there is no RoPE) and runs `mla_decode_attention`
(Triton) over the paged latents, so that a CUDA graph of fixed width can replay it whatever the
context lengths (on CPU under TRITON_INTERPRET=1 too, which is how the tests run this GPU path)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernel_choice import KernelChoice
from evalkit.kernels import MLA_DECODE_SPLIT

from ..batch import ForwardBatch
from ..config import KimiArch
from ..store_rounds import by_round
from .mla_prefill import causal_prefill_attention
from .norm import rms_norm

KV_A_EPS = 1e-6  # transformers builds kv_a_layernorm without eps: its default 1e-6, not rms_norm_eps


class MLAttention(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, arch: KimiArch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.layer_idx = layer_idx
        self.H = arch.num_attention_heads
        self.nope, self.rope, self.vdim = arch.qk_nope_head_dim, arch.qk_rope_head_dim, arch.v_head_dim
        self.R = arch.kv_lora_rank
        self.qk = self.nope + self.rope
        self.scale = self.qk**-0.5
        hid = arch.hidden_size

        def p(*shape):
            return nn.Parameter(torch.empty(*shape, dtype=dtype, device=device), requires_grad=False)

        self.in_proj = p(self.H * self.qk + self.R + self.rope, hid)  # q_proj | kv_a_proj_with_mqa
        self.kv_a_layernorm = p(self.R)
        self.kv_b = p(self.H * (self.nope + self.vdim), self.R)
        self.o_proj = p(hid, self.H * self.vdim)

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        q, c, k_rot = F.linear(h, self.in_proj)[:n].split([self.H * self.qk, self.R, self.rope], dim=-1)
        fused = self.kernels.fused_elementwise
        latent = torch.cat([rms_norm(c, self.kv_a_layernorm, KV_A_EPS, fused), k_rot], dim=-1)
        pool = state.mla[self.layer_idx]
        pool.index_copy_(0, batch.mla_slot_mapping, latent.to(pool.dtype))
        q = q.view(n, self.H, self.qk)
        if batch.is_decode and kernels.use_triton(h):
            o = self._decode_absorbed(q, pool, batch)
        else:
            o = by_round(batch, (q,), lambda b, rows: self._attend_per_sequence(rows[0], pool, b))
        o = o.reshape(n, self.H * self.vdim)
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.o_proj)

    def _expand(self, lat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys [L, H, qk] and values [L, H, v] of a cached context (transformers' expand_kv)."""
        L = lat.shape[0]
        kv = F.linear(lat[:, : self.R], self.kv_b).view(L, self.H, self.nope + self.vdim)
        k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
        k = torch.cat([k_nope, lat[:, None, self.R :].expand(L, self.H, self.rope)], dim=-1)
        return k, v

    def _attend_per_sequence(self, q: torch.Tensor, pool: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        out = torch.zeros(q.shape[0], self.H, self.vdim, dtype=q.dtype, device=q.device)
        start = 0
        for rows, m in zip(batch.context_rows, batch.new_lens):
            lat = pool[rows].to(q.dtype)
            k, v = self._expand(lat)
            qi = q[start : start + m].transpose(0, 1)  # [H, m, qk]
            kt, vt = k.transpose(0, 1), v.transpose(0, 1)
            oi = causal_prefill_attention(qi, kt, vt, self.scale, mode=self.kernels.mla_prefill)
            out[start : start + m] = oi.transpose(0, 1)
            start += m
        return out

    def _decode_absorbed(self, q: torch.Tensor, pool: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        mla_decode_attention = kernels.triton_implementation("mla_decode_attention")
        w = self.kv_b.view(self.H, self.nope + self.vdim, self.R)
        q_nope, q_rot = q.split([self.nope, self.rope], dim=-1)
        q_lat = torch.bmm(q_nope.transpose(0, 1), w[:, : self.nope]).transpose(0, 1)  # [B, H, R]
        splits = batch.mla_splits or -(-int(batch.context_lens.max()) // MLA_DECODE_SPLIT)  # host sync
        o_lat = mla_decode_attention(
            q_lat.contiguous(),
            q_rot.contiguous(),
            pool,
            batch.block_tables,
            batch.context_lens,
            self.scale,
            batch.block_size,
            splits,
            rows=batch.decode_rows,
        )
        o = torch.bmm(o_lat.to(q.dtype).transpose(0, 1), w[:, self.nope :].transpose(1, 2))  # [H, B, v]
        return o.transpose(0, 1)
