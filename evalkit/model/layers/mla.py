"""Multi-head latent attention without rotary embeddings (kimi-linear.md §4).

Per token the cache holds the normalised latent c [kv_lora_rank] and the shared k_rot
[qk_rope_head_dim] (one row of a paged pool, `ForwardBatch.mla_slot_mapping`). Prefill (and decode
on CPU) expands the whole cached context with kv_b_proj and runs softmax attention per sequence,
as transformers does (`mla_prefill`: on the GPU in 16-bit evalkit's Triton flash-attention kernel,
`kernels/mla_prefill`, else SDPA; `KernelChoice.mla_prefill` picks another). A prefill cuts both at
the multiples of the arm's store chunk (`ForwardBatch.store_chunk`): the context is expanded in
GEMMs of one store chunk of rows each (the last one up to the context's end) and the new rows attend
one store chunk at a time, so that every call has the shapes a forward per store chunk would give it
(a forward folding several store chunks computes the same numbers, `store_rounds`), while the
context is expanded once per forward rather than once per store chunk it folds (a 128k prompt at
2,048-token store points: 8 expansions of its context per MLA layer instead of 62). Decode on GPU absorbs
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
from ..store_rounds import new_row_cuts
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
            o = self._attend_per_sequence(q, pool, batch)
        o = o.reshape(n, self.H * self.vdim)
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.o_proj)

    def _expand(self, lat: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys [L, H, qk] and values [L, H, v] of a cached context (transformers' expand_kv), the
        kv_b_proj GEMM on `block` rows at a time (0: all L at once)."""
        L = lat.shape[0]
        step = block if 0 < block < L else L
        kv = [F.linear(lat[a : a + step, : self.R], self.kv_b) for a in range(0, L, step)]
        kv = (kv[0] if len(kv) == 1 else torch.cat(kv)).view(L, self.H, self.nope + self.vdim)
        k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
        k = torch.cat([k_nope, lat[:, None, self.R :].expand(L, self.H, self.rope)], dim=-1)
        return k, v

    def _attend_per_sequence(self, q: torch.Tensor, pool: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        """Each sequence's new rows q [n, H, qk] over its context, one store chunk of rows per call."""
        out = torch.zeros(q.shape[0], self.H, self.vdim, dtype=q.dtype, device=q.device)
        mode = self.kernels.mla_prefill
        start = 0
        for rows, m in zip(batch.context_rows, batch.new_lens):
            L = rows.shape[0]
            k, v = self._expand(pool[rows].to(q.dtype), batch.store_chunk)
            kt, vt = k.transpose(0, 1), v.transpose(0, 1)
            for i, j, b in new_row_cuts(L, m, batch.store_chunk):
                qi = q[start + i : start + j].transpose(0, 1)  # [H, j - i, qk]
                oi = causal_prefill_attention(qi, kt[:, :b], vt[:, :b], self.scale, mode=mode)
                out[start + i : start + j] = oi.transpose(0, 1)
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
