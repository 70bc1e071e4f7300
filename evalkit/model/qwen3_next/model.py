"""The Qwen GDN causal LM (Qwen3-Next, Qwen3.5, Qwen3.5-MoE text models) as the engine runs it:
embeddings, pre-norm decoder layers (GDN or gated attention; dense MLP or MoE with a shared
expert), zero-centred norms, lm_head. A `DecoderLM` like `KimiLinearLM`: `forward(batch, state)`
returns fp32 logits of `batch.logits_indices`; `state.kda[i]` [S, Hv, dk, dv] (the arm's dtype),
`state.conv[i]` [S, conv_dim, W-1], `state.mla[i]` [rows, 2*Hkv*head_dim] (K and V per token)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..batch import ForwardBatch
from ..decoder_lm import DecoderLM, frozen_parameter
from ..layers.moe import DenseMLP
from .attention import GatedAttention
from .config import GDNArch
from .gdn import GatedDeltaNet
from .moe import SharedExpertMoE
from .norms import zero_centred_rms_norm


class GDNDecoderLayer(nn.Module):
    def __init__(self, arch: GDNArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.is_linear = arch.layer_types[i] == "linear_attention"
        self.is_moe = arch.mlp_layer_types[i] == "sparse"
        self.eps = arch.rms_norm_eps
        hid = arch.hidden_size
        self.input_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.post_attention_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.attn = (GatedDeltaNet if self.is_linear else GatedAttention)(arch, i, dtype, device)
        self.mlp = (
            SharedExpertMoE(arch, dtype, device)
            if self.is_moe
            else DenseMLP(hid, arch.intermediate_size, dtype, device)
        )

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state, positions) -> torch.Tensor:
        h = zero_centred_rms_norm(x, self.input_layernorm, self.eps)
        x = x + (self.attn(h, batch, state) if self.is_linear else self.attn(h, batch, state, positions))
        h = zero_centred_rms_norm(x, self.post_attention_layernorm, self.eps)
        if self.is_moe:
            n_routed = None if batch.is_decode else batch.num_tokens
            return x + self.mlp(h, n_routed, batch.is_decode, batch.real_rows)
        return x + self.mlp(h)


def token_positions(batch: ForwardBatch, device: torch.device) -> torch.Tensor | None:
    """Absolute position of every real row: decode from the context lengths (device tensors only,
    CUDA-graph safe), prefill from each sequence's cached rows. None without a paged cache."""
    if batch.is_decode:
        return None if batch.context_lens is None else (batch.context_lens - 1).long()
    if not batch.context_rows:
        return None
    spans = zip(batch.context_rows, batch.new_lens)
    return torch.cat([torch.arange(len(r) - m, len(r), device=device) for r, m in spans])


class Qwen3NextLM(DecoderLM):
    def __init__(self, arch: GDNArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, GDNDecoderLayer, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens)
        positions = token_positions(batch, x.device)
        for layer in self.layers:
            x = layer(x, batch, state, positions)
        return zero_centred_rms_norm(x, self.norm, self.arch.rms_norm_eps)
