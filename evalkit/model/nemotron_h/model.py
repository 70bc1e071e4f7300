"""The NemotronH causal LM as the engine runs it: embeddings, pre-norm blocks with one mixer each
(Mamba2, attention, MoE or MLP; `h = x + mixer(norm(x))`), the final norm, an untied lm_head. A
`DecoderLM`: `forward(batch, state)` returns fp32 logits; `state.kda[i]` [S, H, P, N] (the arm's
format) and `state.conv[i]` [S, I+2GN, K-1] per Mamba2 block, `state.mla[i]` per attention block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..batch import ForwardBatch
from ..decoder_lm import DecoderLM, frozen_parameter
from .attention import NemotronHAttention
from .config import NemotronHArch
from .mamba2 import Mamba2Mixer
from .mlp import NemotronHMoE, Relu2MLP


def rms_norm_fp32_weight(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """NemotronHRMSNorm: normalised in fp32, times the weight in fp32, then cast to x's dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (weight.float() * h).to(x.dtype)


class NemotronHBlock(nn.Module):
    def __init__(self, arch: NemotronHArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.kind = arch.layer_types[i]
        self.eps = arch.layer_norm_epsilon
        self.norm = frozen_parameter(arch.hidden_size, dtype=dtype, device=device)
        if self.kind == "linear_attention":
            self.mixer = Mamba2Mixer(arch, i, dtype, device)
        elif self.kind == "full_attention":
            self.mixer = NemotronHAttention(arch, i, dtype, device)
        elif self.kind == "moe":
            self.mixer = NemotronHMoE(arch, dtype, device)
        else:
            self.mixer = Relu2MLP(arch.hidden_size, arch.intermediate_size, dtype, device)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        h = rms_norm_fp32_weight(x, self.norm, self.eps)
        if self.kind in ("linear_attention", "full_attention"):
            return x + self.mixer(h, batch, state)
        return x + self.mixer(h)


class NemotronHLM(DecoderLM):
    def __init__(self, arch: NemotronHArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, NemotronHBlock, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        x = F.embedding(batch.input_ids, self.embed_tokens)
        for layer in self.layers:
            x = layer(x, batch, state)
        return rms_norm_fp32_weight(x, self.norm, self.arch.layer_norm_epsilon)
