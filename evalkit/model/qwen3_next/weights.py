"""Checkpoint tensors -> the Qwen GDN model's fused parameters (gated-deltanet.md §2, §5, §6).

Accepted layouts:
- text checkpoints (`model.*`) and Qwen3.5 vision-language ones (`model.language_model.*`; the
  vision tower `model.visual.*` and the MTP head `mtp.*` are left unused);
- Qwen3-Next's `in_proj_qkvz` / `in_proj_ba`, grouped per key head, reordered here to the flat
  [q | k | v | z | b | a] rows of Qwen3.5's `in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`;
- experts per expert (`mlp.experts.{e}.{gate,up,down}_proj.weight`) or fused
  (`mlp.experts.gate_up_proj` [E, 2I, hidden] with gate rows first, `mlp.experts.down_proj`
  [E, hidden, I]; also accepted transposed, [E, in, out])."""

from __future__ import annotations

import torch

from ..checkpoint import TensorSource
from ..weights import _put, _Reader, load_embeddings_and_head
from .gdn import per_channel
from .model import Qwen3NextLM

# checkpoint tensors a text model never reads
IGNORED_PREFIXES = ("mtp.", "model.visual.", "model.mtp.")


def _prefix(source: TensorSource) -> str:
    return "model.language_model." if "model.language_model.embed_tokens.weight" in source else "model."


def load_gdn_weights(model: Qwen3NextLM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the unused tensors (ignored ones aside)."""
    r = _Reader(source)
    m = _prefix(source)
    with torch.no_grad():
        load_embeddings_and_head(model, r, m)
        for i, layer in enumerate(model.layers):
            p = f"{m}layers.{i}"
            for name in ("input_layernorm", "post_attention_layernorm"):
                _put(getattr(layer, name), r.first(f"{p}.{name}.weight"), f"{p}.{name}.weight")
            if layer.is_linear:
                _load_gdn(layer.attn, r, f"{p}.linear_attn", model.dtype)
            else:
                _load_attention(layer.attn, r, f"{p}.self_attn")
            if layer.is_moe:
                _load_moe(layer.mlp, r, f"{p}.mlp")
            else:
                _load_swiglu(layer.mlp, r, f"{p}.mlp.")
    return sorted(n for n in set(source.names()) - r.used if not n.startswith(IGNORED_PREFIXES))


def ungroup_qkvz_ba(qkvz: torch.Tensor, ba: torch.Tensor, attn) -> list[torch.Tensor]:
    """Qwen3-Next's per-key-head rows [q_g | k_g | v_g (r heads) | z_g (r heads)] and [b_g | a_g]
    -> the flat q, k, v, z, b, a row blocks (value head j = g*r + i)."""
    Hk, dk, dv, r = attn.Hk, attn.dk, attn.dv, attn.r
    hid = qkvz.shape[-1]
    q, k, v, z = qkvz.view(Hk, 2 * dk + 2 * r * dv, hid).split([dk, dk, r * dv, r * dv], dim=1)
    b, a = ba.view(Hk, 2 * r, hid).split([r, r], dim=1)
    return [t.reshape(-1, hid) for t in (q, k, v, z, b, a)]


def _load_gdn(attn, r: _Reader, a: str, model_dtype: torch.dtype) -> None:
    if r.has(f"{a}.in_proj_qkvz.weight"):
        parts = ungroup_qkvz_ba(r.first(f"{a}.in_proj_qkvz.weight"), r.first(f"{a}.in_proj_ba.weight"), attn)
        what = f"{a}.in_proj_(qkvz|ba).weight"
    else:
        parts = [r.first(f"{a}.in_proj_{n}.weight") for n in ("qkv", "z", "b", "a")]
        what = f"{a}.in_proj_(qkv|z|b|a).weight"
    _put(attn.in_proj, torch.cat(parts, 0), what)
    conv = r.first(f"{a}.conv1d.weight")
    _put(attn.conv_weight, conv.reshape(conv.shape[0], -1), f"{a}.conv1d.weight")
    # stored in the model dtype by transformers (no fp32 keep-list): round like it, compute in fp32
    _put(attn.A_log, r.first(f"{a}.A_log").reshape(-1).to(model_dtype), f"{a}.A_log")
    dt_bias = r.first(f"{a}.dt_bias").reshape(-1).to(model_dtype)
    _put(attn.dt_bias, per_channel(dt_bias[None], attn.dk).reshape(-1), f"{a}.dt_bias")
    _put(attn.norm, r.first(f"{a}.norm.weight"), f"{a}.norm.weight")
    _put(attn.out_proj, r.first(f"{a}.out_proj.weight"), f"{a}.out_proj.weight")


def _load_attention(attn, r: _Reader, a: str) -> None:
    fused = torch.cat([r.first(f"{a}.{n}_proj.weight") for n in ("q", "k", "v")], 0)
    _put(attn.in_proj, fused, f"{a}.(q|k|v)_proj.weight")
    _put(attn.q_norm, r.first(f"{a}.q_norm.weight"), f"{a}.q_norm.weight")
    _put(attn.k_norm, r.first(f"{a}.k_norm.weight"), f"{a}.k_norm.weight")
    _put(attn.o_proj, r.first(f"{a}.o_proj.weight"), f"{a}.o_proj.weight")


def _load_swiglu(mlp, r: _Reader, q: str) -> None:
    gate, up = r.first(f"{q}gate_proj.weight"), r.first(f"{q}up_proj.weight")
    _put(mlp.gate_up, torch.cat([gate, up], 0), f"{q}(gate|up)_proj.weight")
    _put(mlp.down, r.first(f"{q}down_proj.weight"), f"{q}down_proj.weight")


def _out_in(fused: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Fused experts as [E, out, in]; some exports store them [E, in, out] (told apart by shape;
    a square ambiguous one is taken as transformers' [E, out, in])."""
    if fused.shape != shape and fused.shape == (shape[0], shape[2], shape[1]):
        return fused.transpose(1, 2)
    return fused


def _load_moe(moe, r: _Reader, p: str) -> None:
    _put(moe.gate_weight, r.first(f"{p}.gate.weight"), f"{p}.gate.weight")
    if r.has(f"{p}.experts.gate_up_proj"):
        for param, name in ((moe.w13, "gate_up_proj"), (moe.w2, "down_proj")):
            _put(param, _out_in(r.first(f"{p}.experts.{name}"), param.shape), f"{p}.experts.{name}")
    else:
        for e in range(moe.E):
            x = f"{p}.experts.{e}."
            gate, up = r.first(f"{x}gate_proj.weight"), r.first(f"{x}up_proj.weight")
            _put(moe.w13[e], torch.cat([gate, up], 0), f"{x}(gate|up)_proj.weight")
            _put(moe.w2[e], r.first(f"{x}down_proj.weight"), f"{x}down_proj.weight")
    _load_swiglu(moe.shared, r, f"{p}.shared_expert.")
    _put(moe.shared_gate, r.first(f"{p}.shared_expert_gate.weight"), f"{p}.shared_expert_gate.weight")
