"""The Mamba2 hybrid family, NemotronH first (transformers' `nemotron_h`), for evalkit's engine:
config, layers (the Mamba2 mixer on the SSD kernels, attention without RoPE, relu2 MLP, the
sigmoid-routed MoE), model and weights. `evalkit.model.load_model` dispatches here on `model_type`."""

from .config import MAMBA2_MODEL_TYPES, NemotronHArch, parse_nemotron_h_config
from .model import NemotronHLM

# the weight loader is `.weights` (not imported here: it imports evalkit.model.checkpoint)

__all__ = ["MAMBA2_MODEL_TYPES", "NemotronHArch", "NemotronHLM", "parse_nemotron_h_config"]
