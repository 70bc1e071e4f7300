"""Granite-4.0-H (transformers' `granitemoehybrid`), the second Mamba2 hybrid in-process: each layer
is a Mamba2 mixer or attention (no RoPE), then a softmax-routed SwiGLU MoE plus a shared SwiGLU
MLP, with Granite's multipliers. The mixer and attention are NemotronH's (`evalkit.model.nemotron_h`)."""

from .config import GRANITE_MODEL_TYPES, GraniteHybridArch, parse_granite_hybrid_config
from .model import GraniteHybridLM

__all__ = ["GRANITE_MODEL_TYPES", "GraniteHybridArch", "GraniteHybridLM", "parse_granite_hybrid_config"]
