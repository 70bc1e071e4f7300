"""Checkpoint tensors -> the Granite-4.0-H model's parameters.

Accepted layouts: `save_pretrained`'s (`block_sparse_moe.input_linear` [E, 2I, hidden] with gate
rows first, `output_linear` [E, hidden, I], `router.layer.weight`) and transformers' in-memory
names (`experts.gate_up_proj` / `down_proj`, `router.weight`); the Mamba2 and attention tensors as
NemotronH's loader reads them, under `mamba` / `self_attn`; lm_head tied to the embeddings when the
config ties them and the checkpoint has none."""

from __future__ import annotations

import torch

from ..checkpoint import TensorSource
from ..nemotron_h.weights import _load_attention, _load_mamba2
from ..weights import _put, _Reader, load_embeddings_and_head
from .model import GraniteHybridLM


def load_granite_hybrid_weights(model: GraniteHybridLM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the unused tensors."""
    r = _Reader(source)
    with torch.no_grad():
        load_embeddings_and_head(model, r, "model.")
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}"
            for name in ("input_layernorm", "post_attention_layernorm"):
                _put(getattr(layer, name), r.first(f"{p}.{name}.weight"), f"{p}.{name}.weight")
            if layer.is_linear:
                _load_mamba2(layer.mixer, r, f"{p}.mamba")
            else:
                _load_attention(layer.mixer, r, f"{p}.self_attn")
            m = f"{p}.block_sparse_moe"
            names = (f"{m}.router.layer.weight", f"{m}.router.weight")
            _put(layer.moe.router, r.first(*names), names[0])
            names = (f"{m}.input_linear.weight", f"{m}.experts.gate_up_proj")
            _put(layer.moe.gate_up, r.first(*names), names[0])
            names = (f"{m}.output_linear.weight", f"{m}.experts.down_proj")
            _put(layer.moe.down, r.first(*names), names[0])
            s = f"{p}.shared_mlp"
            _put(layer.shared.gate_up, r.first(f"{s}.input_linear.weight"), f"{s}.input_linear.weight")
            _put(layer.shared.down, r.first(f"{s}.output_linear.weight"), f"{s}.output_linear.weight")
    return sorted(set(source.names()) - r.used)
