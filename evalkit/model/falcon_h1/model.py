"""The Falcon-H1 causal LM as the engine runs it: embeddings x embedding_multiplier; per layer, on
h = norm(x), x + mamba(h) * ssm_out_multiplier + attention(h * attention_in_multiplier) *
attention_out_multiplier (the Mamba2 mixer and the attention read the same layer index: its state
pools and its K/V rows), then x + MLP(norm(x)) with the gate x mlp_multipliers[0] inside SiLU and
the output x mlp_multipliers[1]; the final norm; logits x lm_head_multiplier. RMSNorm is Llama's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..batch import ForwardBatch
from ..decoder_lm import DecoderLM, frozen_parameter
from ..granite_hybrid.model import rms_norm
from ..layers.moe import DenseMLP, swiglu_activation
from ..nemotron_h.attention import NemotronHAttention
from ..qwen3_next.model import token_positions
from .config import FalconH1Arch
from .mixer import FalconH1Mixer


class FalconH1MLP(DenseMLP):
    """down(silu(gate(x) * m0) * up(x)) * m1 (transformers' FalconH1MLP)."""

    def __init__(self, arch: FalconH1Arch, dtype: torch.dtype, device):
        super().__init__(arch.hidden_size, arch.intermediate_size, dtype, device)
        self.gate_multiplier, self.down_multiplier = arch.mlp_multipliers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gu = F.linear(x, self.gate_up)
        if self.gate_multiplier != 1.0:
            gate, up = gu.chunk(2, dim=-1)
            gu = torch.cat([gate * self.gate_multiplier, up], dim=-1)
        y = F.linear(swiglu_activation(gu, self.kernels.fused_elementwise), self.down)
        return y * self.down_multiplier


class FalconH1Layer(nn.Module):
    def __init__(self, arch: FalconH1Arch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.eps = arch.rms_norm_eps
        self.ssm_out, self.attn_in = arch.ssm_out_multiplier, arch.attention_in_multiplier
        self.attn_out = arch.attention_out_multiplier
        hid = arch.hidden_size
        self.input_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.pre_ff_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.mamba = FalconH1Mixer(arch, i, dtype, device)
        self.self_attn = NemotronHAttention(
            arch,
            i,
            dtype,
            device,
            rotary_dim=arch.head_dim,
            rope_theta=arch.rope_theta,
            key_multiplier=arch.key_multiplier,
        )
        self.feed_forward = FalconH1MLP(arch, dtype, device)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state, positions) -> torch.Tensor:
        h = rms_norm(x, self.input_layernorm, self.eps)
        m = self.mamba(h, batch, state) * self.ssm_out
        a = self.self_attn(h * self.attn_in, batch, state, positions) * self.attn_out
        x = x + (m + a)
        return x + self.feed_forward(rms_norm(x, self.pre_ff_layernorm, self.eps))


class FalconH1LM(DecoderLM):
    def __init__(self, arch: FalconH1Arch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, FalconH1Layer, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens) * self.arch.embedding_multiplier
        positions = token_positions(batch, x.device)
        for layer in self.layers:
            x = layer(x, batch, state, positions)
        return rms_norm(x, self.norm, self.arch.rms_norm_eps)

    def logits(self, h: torch.Tensor, block: int = 0) -> torch.Tensor:
        """fp32 logits times Falcon-H1's lm_head_multiplier."""
        return super().logits(h, block) * self.arch.lm_head_multiplier
