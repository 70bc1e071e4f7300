"""The Bamba causal LM as the engine runs it: embeddings; per layer h = x + mixer(norm(x)) (mixer:
NemotronH's Mamba2 mixer, or its attention with Bamba's partial RoPE) and h = h + MLP(norm(h)) (the
engine's SwiGLU `DenseMLP`); the final norm; an lm_head. Bamba's RMSNorm is Llama's (cast to the
input dtype before the weight), Granite-4.0-H's `rms_norm`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..batch import ForwardBatch
from ..decoder_lm import DecoderLM, frozen_parameter
from ..granite_hybrid.model import rms_norm
from ..layers.moe import DenseMLP
from ..nemotron_h.attention import NemotronHAttention
from ..nemotron_h.mamba2 import Mamba2Mixer
from ..qwen3_next.model import token_positions
from .config import BambaArch


class BambaLayer(nn.Module):
    def __init__(self, arch: BambaArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.is_linear = arch.layer_types[i] == "linear_attention"
        self.eps = arch.rms_norm_eps
        hid = arch.hidden_size
        self.input_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.pre_ff_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        if self.is_linear:
            self.mixer = Mamba2Mixer(arch, i, dtype, device)
        else:
            self.mixer = NemotronHAttention(
                arch, i, dtype, device, rotary_dim=arch.rotary_dim, rope_theta=arch.rope_theta
            )
        self.feed_forward = DenseMLP(hid, arch.intermediate_size, dtype, device)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state, positions) -> torch.Tensor:
        h = rms_norm(x, self.input_layernorm, self.eps)
        x = x + (self.mixer(h, batch, state) if self.is_linear else self.mixer(h, batch, state, positions))
        return x + self.feed_forward(rms_norm(x, self.pre_ff_layernorm, self.eps))


class BambaLM(DecoderLM):
    def __init__(self, arch: BambaArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, BambaLayer, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens)
        positions = token_positions(batch, x.device)
        for layer in self.layers:
            x = layer(x, batch, state, positions)
        return rms_norm(x, self.norm, self.arch.rms_norm_eps)
