"""The Kimi-Linear causal LM as the engine runs it: embeddings, pre-norm decoder layers (KDA or MLA
mixer, dense MLP or MoE), final norm, untied lm_head.

`KimiLinearLM.forward(batch, state)` runs one packed forward pass and returns fp32 logits for
`batch.logits_indices` (every real row when None). `state` holds the per-layer pools
(`evalkit.engine.state.StatePools`): `state.kda[i]` [S, H, K, V] in the arm's dtype,
`state.conv[i]` [S, 3*H*K, W-1], `state.mla[i]` [rows, kv_lora_rank + rope] (model dtype)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .batch import ForwardBatch
from .config import KimiArch
from .layers.kda import KDAttention
from .layers.mla import MLAttention
from .layers.moe import DenseMLP, MoE
from .layers.norm import rms_norm


class DecoderLayer(nn.Module):
    def __init__(self, arch: KimiArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.is_kda = arch.layer_types[i] == "linear_attention"
        self.is_moe = arch.mlp_layer_types[i] == "sparse"
        self.eps = arch.rms_norm_eps
        hid = arch.hidden_size
        self.input_layernorm = nn.Parameter(torch.empty(hid, dtype=dtype, device=device), requires_grad=False)
        self.post_attention_layernorm = nn.Parameter(
            torch.empty(hid, dtype=dtype, device=device), requires_grad=False
        )
        self.attn = (KDAttention if self.is_kda else MLAttention)(arch, i, dtype, device)
        self.mlp = (
            MoE(arch, dtype, device) if self.is_moe else DenseMLP(hid, arch.intermediate_size, dtype, device)
        )

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        x = x + self.attn(rms_norm(x, self.input_layernorm, self.eps), batch, state)
        h = rms_norm(x, self.post_attention_layernorm, self.eps)
        if self.is_moe:
            n_routed = None if batch.is_decode else batch.num_tokens
            return x + self.mlp(h, n_routed)
        return x + self.mlp(h)


class KimiLinearLM(nn.Module):
    def __init__(self, arch: KimiArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.arch, self.dtype, self.device = arch, dtype, torch.device(device)
        hid = arch.hidden_size
        self.embed_tokens = nn.Parameter(
            torch.empty(arch.vocab_size, hid, dtype=dtype, device=device), requires_grad=False
        )
        self.layers = nn.ModuleList(
            DecoderLayer(arch, i, dtype, device) for i in range(arch.num_hidden_layers)
        )
        self.norm = nn.Parameter(torch.empty(hid, dtype=dtype, device=device), requires_grad=False)
        self.lm_head = nn.Parameter(
            torch.empty(arch.vocab_size, hid, dtype=dtype, device=device), requires_grad=False
        )

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens)
        for layer in self.layers:
            x = layer(x, batch, state)
        return rms_norm(x, self.norm, self.arch.rms_norm_eps)

    def logits(self, h: torch.Tensor, block: int = 0) -> torch.Tensor:
        """fp32 logits of rows h; with `block` > 0 the lm_head GEMM always sees exactly `block` rows."""
        if block <= 0 or h.shape[0] == block:
            return F.linear(h, self.lm_head).float()
        out = []
        for s in range(0, h.shape[0], block):
            part = h[s : s + block]
            m = part.shape[0]
            if m < block:
                part = F.pad(part, (0, 0, 0, block - m))
            out.append(F.linear(part, self.lm_head).float()[:m])
        return torch.cat(out) if out else h.new_zeros(0, self.arch.vocab_size, dtype=torch.float32)

    def forward(self, batch: ForwardBatch, state) -> torch.Tensor:
        h = self.hidden_states(batch, state)
        if batch.logits_indices is not None:
            h = h[batch.logits_indices]
        else:
            h = h[: batch.num_tokens]
        return self.logits(h, batch.logits_block)
