"""Kimi-Linear for evalkit's engine: config parsing, checkpoint loading, layers.

    from evalkit.model import load_model
    loaded = load_model("path/or/hub-id", device="cuda")   # .model, .arch, .tokenizer, .path

`KimiLinearLM.forward(batch: ForwardBatch, state)` is the low-level forward pass; the engine
(`evalkit.engine`) builds the batches and owns the state pools."""

from .batch import ForwardBatch
from .config import KimiArch, UnsupportedModelError, parse_config
from .kimi import KimiLinearLM
from .loader import LoadedModel, default_dtype, load_model
from .random_init import kimi_linear_48b_config, random_model

__all__ = [
    "ForwardBatch",
    "KimiArch",
    "KimiLinearLM",
    "LoadedModel",
    "UnsupportedModelError",
    "default_dtype",
    "load_model",
    "parse_config",
    "kimi_linear_48b_config",
    "random_model",
]
