"""The Granite-4.0-H causal LM as the engine runs it: embeddings x embedding_multiplier; per layer
h = x + mixer(norm(x)) * residual_multiplier (mixer: Mamba2 or attention, NemotronH's layers) and
h = h + (MoE + shared MLP)(norm(h)) * residual_multiplier; the final norm; logits / logits_scaling.
Granite's RMSNorm casts to the input dtype before the weight (Llama's order)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..batch import ForwardBatch
from ..decoder_lm import DecoderLM, frozen_parameter
from ..nemotron_h.attention import NemotronHAttention
from ..nemotron_h.mamba2 import Mamba2Mixer
from .config import GraniteHybridArch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """GraniteMoeHybridRMSNorm: normalised in fp32, cast to x's dtype, times the weight."""
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class SwiGLU(nn.Module):
    """Granite's shared MLP: input_linear rows [gate | up], silu(gate) * up, output_linear."""

    def __init__(self, hidden: int, inner: int, dtype: torch.dtype, device):
        super().__init__()
        self.gate_up = frozen_parameter(2 * inner, hidden, dtype=dtype, device=device)
        self.down = frozen_parameter(hidden, inner, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.gate_up).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.down)


class GraniteMoE(nn.Module):
    """Softmax over the top-k router logits (fp32, then the model dtype); SwiGLU experts."""

    def __init__(self, arch: GraniteHybridArch, dtype: torch.dtype, device):
        super().__init__()
        self.E, self.k = arch.num_local_experts, arch.num_experts_per_tok
        hid, inner = arch.hidden_size, arch.intermediate_size
        self.router = frozen_parameter(self.E, hid, dtype=dtype, device=device)
        self.gate_up = frozen_parameter(self.E, 2 * inner, hid, dtype=dtype, device=device)
        self.down = frozen_parameter(self.E, hid, inner, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = F.linear(x, self.router).float()
        top, ids = logits.topk(self.k, dim=-1)
        w = torch.softmax(top, dim=-1).type_as(x)
        out = torch.zeros_like(x)
        for e in ids.unique().tolist():
            rows, slot = torch.where(ids == e)
            gate, up = F.linear(x[rows], self.gate_up[e]).chunk(2, dim=-1)
            ye = F.linear(F.silu(gate) * up, self.down[e])
            out.index_add_(0, rows, (ye * w[rows, slot, None]).to(out.dtype))
        return out


class GraniteHybridLayer(nn.Module):
    def __init__(self, arch: GraniteHybridArch, i: int, dtype: torch.dtype, device):
        super().__init__()
        self.is_linear = arch.layer_types[i] == "linear_attention"
        self.eps, self.residual = arch.rms_norm_eps, arch.residual_multiplier
        hid = arch.hidden_size
        self.input_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.post_attention_layernorm = frozen_parameter(hid, dtype=dtype, device=device)
        self.mixer = (Mamba2Mixer if self.is_linear else NemotronHAttention)(arch, i, dtype, device)
        self.moe = GraniteMoE(arch, dtype, device)
        self.shared = SwiGLU(hid, arch.shared_intermediate_size, dtype, device)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        x = x + self.mixer(rms_norm(x, self.input_layernorm, self.eps), batch, state) * self.residual
        h = rms_norm(x, self.post_attention_layernorm, self.eps)
        return x + (self.moe(h) + self.shared(h)) * self.residual


class GraniteHybridLM(DecoderLM):
    def __init__(self, arch: GraniteHybridArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, GraniteHybridLayer, dtype, device)

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        x = F.embedding(batch.input_ids, self.embed_tokens) * self.arch.embedding_multiplier
        for layer in self.layers:
            x = layer(x, batch, state)
        return rms_norm(x, self.norm, self.arch.rms_norm_eps)

    def logits(self, h: torch.Tensor, block: int = 0) -> torch.Tensor:
        """fp32 logits divided by Granite's logits_scaling."""
        return super().logits(h, block) / self.arch.logits_scaling
