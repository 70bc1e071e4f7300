"""Checkpoint tensors -> the Bamba model's parameters: transformers' names (`model.layers.i.mamba.*`
as NemotronH's loader reads a mixer, `self_attn.{q,k,v,o}_proj`, `feed_forward.{gate,up,down}_proj`,
`input_layernorm`, `pre_ff_layernorm`, `model.final_layernorm`); lm_head tied to the embeddings
when the config ties them and the checkpoint has none."""

from __future__ import annotations

import torch

from ..checkpoint import TensorSource
from ..nemotron_h.weights import _load_attention, _load_mamba2
from ..weights import _put, _Reader, _swiglu_into, load_embeddings_and_head
from .model import BambaLM


def load_bamba_weights(model: BambaLM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the unused tensors."""
    r = _Reader(source)
    with torch.no_grad():
        load_embeddings_and_head(model, r, "model.", norm="final_layernorm")
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}"
            load_hybrid_layer_common(layer, r, p)
            if layer.is_linear:
                _load_mamba2(layer.mixer, r, f"{p}.mamba")
            else:
                _load_attention(layer.mixer, r, f"{p}.self_attn")
    return sorted(set(source.names()) - r.used)


def load_hybrid_layer_common(layer, r: _Reader, p: str) -> None:
    """The two norms and the SwiGLU `feed_forward` of a Bamba or Falcon-H1 layer."""
    for name in ("input_layernorm", "pre_ff_layernorm"):
        _put(getattr(layer, name), r.first(f"{p}.{name}.weight"), f"{p}.{name}.weight")
    _swiglu_into(layer.feed_forward, r, [f"{p}.feed_forward."], f"{p}.feed_forward")
