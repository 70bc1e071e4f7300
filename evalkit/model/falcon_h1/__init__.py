"""Falcon-H1 (transformers' `falcon_h1`), a Mamba2 hybrid in-process: every layer runs a Mamba2
mixer and GQA attention (full RoPE) side by side on the same normed input, then a SwiGLU MLP, with
Falcon-H1's muP multipliers. The mixer (with Falcon's input/row scaling and gate order), attention
and MLP extend NemotronH's layers and the engine's `DenseMLP`."""

from .config import FALCON_H1_MODEL_TYPES, FalconH1Arch, parse_falcon_h1_config
from .model import FalconH1LM

__all__ = ["FALCON_H1_MODEL_TYPES", "FalconH1Arch", "FalconH1LM", "parse_falcon_h1_config"]
