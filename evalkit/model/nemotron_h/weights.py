"""Checkpoint tensors -> the NemotronH model's parameters (mamba2.md §2).

Accepted layouts: the release/`save_pretrained` names (`backbone.*`, `backbone.embeddings`,
`backbone.norm_f`, experts per expert `mixer.experts.{e}.{up,down}_proj.weight`) and transformers'
in-memory names (`model.*`, merged `mixer.experts.up_proj` [E, I, hidden] / `down_proj`
[E, hidden, I]). A missing tensor is one line naming it; the MTP head (`mtp.*`) is left unused."""

from __future__ import annotations

import torch

from ..checkpoint import TensorSource
from ..weights import _put, _Reader
from .model import NemotronHLM

IGNORED_PREFIXES = ("mtp.", "backbone.mtp.", "model.mtp.")


def _prefix(source: TensorSource) -> str:
    return "model." if "model.embeddings.weight" in source else "backbone."


def load_nemotron_h_weights(model: NemotronHLM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the unused tensors (ignored ones aside)."""
    r = _Reader(source)
    m = _prefix(source)
    with torch.no_grad():
        _put(model.embed_tokens, r.first(f"{m}embeddings.weight"), f"{m}embeddings.weight")
        _put(model.norm, r.first(f"{m}norm_f.weight"), f"{m}norm_f.weight")
        _put(model.lm_head, r.first("lm_head.weight"), "lm_head.weight")
        for i, block in enumerate(model.layers):
            p = f"{m}layers.{i}"
            _put(block.norm, r.first(f"{p}.norm.weight"), f"{p}.norm.weight")
            load = {
                "linear_attention": _load_mamba2,
                "full_attention": _load_attention,
                "moe": _load_moe,
                "mlp": _load_mlp,
            }[block.kind]
            load(block.mixer, r, f"{p}.mixer")
    return sorted(n for n in set(source.names()) - r.used if not n.startswith(IGNORED_PREFIXES))


def _load_mamba2(mixer, r: _Reader, a: str) -> None:
    _put(mixer.in_proj, r.first(f"{a}.in_proj.weight"), f"{a}.in_proj.weight")
    conv = r.first(f"{a}.conv1d.weight")
    _put(mixer.conv_weight, conv.reshape(conv.shape[0], -1), f"{a}.conv1d.weight")
    if mixer.conv_bias is not None:
        _put(mixer.conv_bias, r.first(f"{a}.conv1d.bias"), f"{a}.conv1d.bias")
    for name in ("A_log", "dt_bias", "D"):
        _put(getattr(mixer, name), r.first(f"{a}.{name}").reshape(-1), f"{a}.{name}")
    if mixer.norm is not None:  # Falcon-H1 without mamba_rms_norm has none
        _put(mixer.norm, r.first(f"{a}.norm.weight"), f"{a}.norm.weight")
    _put(mixer.out_proj, r.first(f"{a}.out_proj.weight"), f"{a}.out_proj.weight")


def _load_attention(attn, r: _Reader, a: str) -> None:
    fused = torch.cat([r.first(f"{a}.{n}_proj.weight") for n in ("q", "k", "v")], 0)
    _put(attn.in_proj, fused, f"{a}.(q|k|v)_proj.weight")
    _put(attn.o_proj, r.first(f"{a}.o_proj.weight"), f"{a}.o_proj.weight")


def _load_mlp(mlp, r: _Reader, a: str) -> None:
    _put(mlp.up, r.first(f"{a}.up_proj.weight"), f"{a}.up_proj.weight")
    _put(mlp.down, r.first(f"{a}.down_proj.weight"), f"{a}.down_proj.weight")


def _load_moe(moe, r: _Reader, a: str) -> None:
    _put(moe.gate_weight, r.first(f"{a}.gate.weight"), f"{a}.gate.weight")
    _put(moe.score_bias, r.first(f"{a}.gate.e_score_correction_bias"), f"{a}.gate.e_score_correction_bias")
    if r.has(f"{a}.experts.up_proj"):
        _put(moe.up, r.first(f"{a}.experts.up_proj"), f"{a}.experts.up_proj")
        _put(moe.down, r.first(f"{a}.experts.down_proj"), f"{a}.experts.down_proj")
    else:
        for e in range(moe.E):
            x = f"{a}.experts.{e}"
            _put(moe.up[e], r.first(f"{x}.up_proj.weight"), f"{x}.up_proj.weight")
            _put(moe.down[e], r.first(f"{x}.down_proj.weight"), f"{x}.down_proj.weight")
    _load_mlp(moe.shared, r, f"{a}.shared_experts")
