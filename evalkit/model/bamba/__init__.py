"""Bamba (transformers' `bamba`), a Mamba2 hybrid in-process: each layer is a Mamba2 mixer or GQA
attention with half-rotary RoPE (`attn_layer_indices`), then a SwiGLU MLP. The mixer and attention
are NemotronH's (`evalkit.model.nemotron_h`), the MLP the engine's `DenseMLP`."""

from .config import BAMBA_MODEL_TYPES, BambaArch, parse_bamba_config
from .model import BambaLM

__all__ = ["BAMBA_MODEL_TYPES", "BambaArch", "BambaLM", "parse_bamba_config"]
