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

from evalkit.kernel_choice import KernelChoice

from .batch import ForwardBatch
from .config import KimiArch
from .decoder_lm import DecoderLM, frozen_parameter
from .layers.kda import KDAttention
from .layers.mla import MLAttention
from .layers.moe import DenseMLP, MoE
from .layers.norm import rms_norm


class DecoderLayer(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, arch: KimiArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.is_kda = arch.layer_types[i] == "linear_attention"
        self.is_moe = arch.mlp_layer_types[i] == "sparse"
        self.eps = arch.rms_norm_eps
        hid = arch.hidden_size
        self.input_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.post_attention_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.attn = (KDAttention if self.is_kda else MLAttention)(arch, i, dtype, device)
        self.mlp = (
            MoE(arch, dtype, device) if self.is_moe else DenseMLP(hid, arch.intermediate_size, dtype, device)
        )

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        fused = self.kernels.fused_elementwise
        x = x + self.attn(rms_norm(x, self.input_layernorm, self.eps, fused), batch, state)
        h = rms_norm(x, self.post_attention_layernorm, self.eps, fused)
        if self.is_moe:
            n_routed = None if batch.is_decode else batch.num_tokens
            return x + self.mlp(h, n_routed, batch.is_decode, batch.real_rows)
        return x + self.mlp(h)


class KimiLinearLM(DecoderLM):
    def __init__(self, arch: KimiArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, DecoderLayer, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens)
        for layer in self.layers:
            x = layer(x, batch, state)
        return rms_norm(x, self.norm, self.arch.rms_norm_eps, self.kernels.fused_elementwise)
