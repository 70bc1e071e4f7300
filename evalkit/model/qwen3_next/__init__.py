"""The Gated DeltaNet family (transformers' `qwen3_next`, `qwen3_5`, `qwen3_5_moe` text models) for
evalkit's engine: config, layers (GDN on the KDA kernels, gated attention, MoE with a shared
expert), model and weights. `evalkit.model.load_model` dispatches here on `model_type`."""

from .config import GDN_MODEL_TYPES, GDNArch, parse_gdn_config
from .model import Qwen3NextLM

# the weight loader is `.weights` (not imported here: it imports evalkit.model.checkpoint)

__all__ = ["GDN_MODEL_TYPES", "GDNArch", "Qwen3NextLM", "parse_gdn_config"]
