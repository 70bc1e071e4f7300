"""Checkpoint tensors -> the engine's (partly fused) parameters.

Accepted spellings (kimi-linear.md §5):
- the real checkpoint and transformers' `save_pretrained`: `self_attn.{q,k,v}_conv1d`, gate params
  directly under `self_attn`, experts as `block_sparse_moe.experts.{e}.w1/w2/w3`;
- transformers' in-memory names: `self_attn.conv1d`, `self_attn.forget_gate.*`,
  `mlp.experts.gate_up_proj` / `down_proj`;
- layer 0's dense MLP as `mlp.*` (real checkpoint) or `block_sparse_moe.*` (save_pretrained).
Each parameter is filled in place (copied to its device and dtype); a missing tensor is an error
naming it, and tensors that nothing consumed are reported."""

from __future__ import annotations

import torch

from evalkit.errors import InputError

from .checkpoint import TensorSource
from .decoder_lm import DecoderLM
from .kimi import KimiLinearLM


class _Reader:
    def __init__(self, source: TensorSource):
        self.source = source
        self.used: set[str] = set()

    def first(self, *names: str) -> torch.Tensor:
        for name in names:
            if name in self.source:
                self.used.add(name)
                return self.source.get(name)
        raise InputError(
            f"checkpoint is missing tensor {names[0]!r}" + (f" (or {names[1:]})" if len(names) > 1 else "")
        )

    def has(self, *names: str) -> bool:
        return any(n in self.source for n in names)


def _put(param: torch.Tensor, value: torch.Tensor, what: str) -> None:
    if tuple(value.shape) != tuple(param.shape):
        raise InputError(f"tensor {what} has shape {tuple(value.shape)}, expected {tuple(param.shape)}")
    param.copy_(value.to(param.dtype))


def _mlp_prefixes(p: str) -> list[str]:
    return [f"{p}.mlp.", f"{p}.block_sparse_moe."]


def load_embeddings_and_head(model: DecoderLM, r: _Reader, prefix: str, norm: str = "norm") -> None:
    """The token embeddings, final norm (`norm`: its name) and lm_head (the embeddings again when
    tied and absent); `prefix` is where the checkpoint keeps the decoder ("model." or a VLM's
    language model)."""
    _put(model.embed_tokens, r.first(f"{prefix}embed_tokens.weight"), f"{prefix}embed_tokens.weight")
    _put(model.norm, r.first(f"{prefix}{norm}.weight"), f"{prefix}{norm}.weight")
    if r.has("lm_head.weight"):
        _put(model.lm_head, r.first("lm_head.weight"), "lm_head.weight")
    elif model.arch.tie_word_embeddings:
        model.lm_head.copy_(model.embed_tokens)
    else:
        r.first("lm_head.weight")


def load_weights(model: KimiLinearLM, source: TensorSource) -> list[str]:
    """Fill every parameter of `model` from `source`; returns the checkpoint tensors left unused."""
    r = _Reader(source)
    with torch.no_grad():
        load_embeddings_and_head(model, r, "model.")
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}"
            _put(layer.input_layernorm, r.first(f"{p}.input_layernorm.weight"), f"{p}.input_layernorm.weight")
            _put(
                layer.post_attention_layernorm,
                r.first(f"{p}.post_attention_layernorm.weight"),
                f"{p}.post_attention_layernorm.weight",
            )
            if layer.is_kda:
                _load_kda(layer.attn, r, f"{p}.self_attn", model.dtype)
            else:
                _load_mla(layer.attn, r, f"{p}.self_attn")
            if layer.is_moe:
                _load_moe(layer.mlp, r, p)
            else:
                _load_dense(layer.mlp, r, p, i)
    return sorted(set(source.names()) - r.used)


def _load_kda(attn, r: _Reader, a: str, model_dtype: torch.dtype) -> None:
    def gate_param(name):
        return r.first(f"{a}.{name}", f"{a}.forget_gate.{name}")

    parts = [r.first(f"{a}.{n}_proj.weight") for n in ("q", "k", "v")]
    parts += [gate_param("f_a_proj.weight"), r.first(f"{a}.g_a_proj.weight"), r.first(f"{a}.b_proj.weight")]
    _put(attn.in_proj, torch.cat(parts, 0), f"{a}.(q|k|v|f_a|g_a|b)_proj.weight")
    if r.has(f"{a}.q_conv1d.weight"):
        conv = torch.cat([r.first(f"{a}.{n}_conv1d.weight") for n in ("q", "k", "v")], 0)
    else:
        conv = r.first(f"{a}.conv1d.weight")
    _put(attn.conv_weight, conv.reshape(conv.shape[0], -1), f"{a}.(q|k|v)_conv1d.weight")
    _put(attn.f_b, gate_param("f_b_proj.weight"), f"{a}.f_b_proj.weight")
    _put(attn.g_b, r.first(f"{a}.g_b_proj.weight"), f"{a}.g_b_proj.weight")
    # transformers does not keep A_log in fp32: a bf16 load rounds it, then `.float()` before exp
    _put(attn.A_log, gate_param("A_log").reshape(-1).to(model_dtype), f"{a}.A_log")
    _put(attn.dt_bias, gate_param("dt_bias").reshape(-1), f"{a}.dt_bias")
    _put(attn.o_norm, r.first(f"{a}.o_norm.weight"), f"{a}.o_norm.weight")
    _put(attn.o_proj, r.first(f"{a}.o_proj.weight"), f"{a}.o_proj.weight")


def _load_mla(attn, r: _Reader, a: str) -> None:
    fused = torch.cat([r.first(f"{a}.q_proj.weight"), r.first(f"{a}.kv_a_proj_with_mqa.weight")], 0)
    _put(attn.in_proj, fused, f"{a}.(q_proj|kv_a_proj_with_mqa).weight")
    _put(attn.kv_a_layernorm, r.first(f"{a}.kv_a_layernorm.weight"), f"{a}.kv_a_layernorm.weight")
    _put(attn.kv_b, r.first(f"{a}.kv_b_proj.weight"), f"{a}.kv_b_proj.weight")
    _put(attn.o_proj, r.first(f"{a}.o_proj.weight"), f"{a}.o_proj.weight")


def _swiglu_into(mlp, r: _Reader, prefixes: list[str], what: str) -> None:
    gate = r.first(*[f"{q}gate_proj.weight" for q in prefixes])
    up = r.first(*[f"{q}up_proj.weight" for q in prefixes])
    _put(mlp.gate_up, torch.cat([gate, up], 0), f"{what}.(gate|up)_proj.weight")
    _put(mlp.down, r.first(*[f"{q}down_proj.weight" for q in prefixes]), f"{what}.down_proj.weight")


def _load_dense(mlp, r: _Reader, p: str, i: int) -> None:
    _swiglu_into(mlp, r, _mlp_prefixes(p), f"{p}.mlp")


def _load_moe(moe, r: _Reader, p: str) -> None:
    pre = _mlp_prefixes(p)
    _put(moe.gate_weight, r.first(*[f"{q}gate.weight" for q in pre]), f"{p}.block_sparse_moe.gate.weight")
    _put(
        moe.e_bias,
        r.first(*[f"{q}gate.e_score_correction_bias" for q in pre]),
        f"{p}.block_sparse_moe.gate.e_score_correction_bias",
    )
    fused = [f"{q}experts.gate_up_proj" for q in pre]
    if r.has(*fused):
        _put(moe.w13, r.first(*fused), fused[0])
        _put(moe.w2, r.first(*[f"{q}experts.down_proj" for q in pre]), f"{p}.mlp.experts.down_proj")
    else:
        for e in range(moe.E):
            ex = [f"{q}experts.{e}." for q in pre]
            w1 = r.first(*[f"{x}w1.weight" for x in ex])
            w3 = r.first(*[f"{x}w3.weight" for x in ex])
            _put(moe.w13[e], torch.cat([w1, w3], 0), f"{ex[1]}w1|w3.weight")
            _put(moe.w2[e], r.first(*[f"{x}w2.weight" for x in ex]), f"{ex[1]}w2.weight")
    _swiglu_into(moe.shared, r, [f"{q}shared_experts." for q in pre], f"{p}.block_sparse_moe.shared_experts")
