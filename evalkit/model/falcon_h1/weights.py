"""Checkpoint tensors -> the Falcon-H1 model's parameters: transformers' names (per layer both
`mamba.*`, as NemotronH's loader reads a mixer, without `norm.weight` unless `mamba_rms_norm`, and
`self_attn.{q,k,v,o}_proj`; Bamba's norms and `feed_forward`; `model.final_layernorm`); lm_head tied
to the embeddings when the config ties them and the checkpoint has none. transformers' `mup_vector`
is not stored (a non-persistent buffer): the mixer rebuilds it from the config."""

from __future__ import annotations

import torch

from ..bamba.weights import load_hybrid_layer_common
from ..checkpoint import TensorSource
from ..nemotron_h.weights import _load_attention, _load_mamba2
from ..weights import _Reader, load_embeddings_and_head
from .model import FalconH1LM


def load_falcon_h1_weights(model: FalconH1LM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the unused tensors."""
    r = _Reader(source)
    with torch.no_grad():
        load_embeddings_and_head(model, r, "model.", norm="final_layernorm")
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}"
            load_hybrid_layer_common(layer, r, p)
            _load_mamba2(layer.mamba, r, f"{p}.mamba")
            _load_attention(layer.self_attn, r, f"{p}.self_attn")
    return sorted(set(source.names()) - r.used)
