"""The architecture of a Granite-4.0-H checkpoint (transformers' `granitemoehybrid`; mamba2.md §1,
§7), read from its `config.json`. `GraniteHybridArch` answers the Mamba2 mixer and attention under
NemotronH's names (`mamba_num_heads`, `ssm_state_size`, `attention_scale`, ...) and the engine in
its KDA/MLA vocabulary (Mamba2 layers are `kda_layers`, attention layers `mla_layers`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import LayerKinds, UnsupportedModelError, config_hash
from ..nemotron_h.config import (
    Mamba2Vocabulary,
    read_mamba_fields,
    read_token_ids,
    refuse_finite_time_step_limit,
)

GRANITE_MODEL_TYPES = {"granitemoehybrid": "granitemoehybrid"}
LAYER_TYPES = ("linear_attention", "full_attention")


@dataclass
class GraniteHybridArch(Mamba2Vocabulary, LayerKinds):
    """Everything the math depends on (defaults: transformers' GraniteMoeHybridConfig)."""

    family: str = "granitemoehybrid"
    vocab_size: int = 32000
    hidden_size: int = 4096
    num_hidden_layers: int = 32
    rms_norm_eps: float = 1e-6
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 1024  # per expert
    shared_intermediate_size: int = 1024
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    mamba_num_heads: int = 128
    mamba_head_dim: int = 32
    ssm_state_size: int = 256
    n_groups: int = 1
    conv_kernel: int = 4
    use_conv_bias: bool = True
    mamba_inner: int = 4096
    embedding_multiplier: float = 1.0
    residual_multiplier: float = 1.0
    attention_multiplier: float = 1.0
    logits_scaling: float = 1.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    layer_types: list[str] = field(default_factory=list)
    config_hash: str = ""

    # -- the Mamba2 mixer and attention (NemotronH's names) ------------------------------------
    @property
    def layer_norm_epsilon(self) -> float:
        """The gated norm's eps (Granite's rms_norm_eps)."""
        return self.rms_norm_eps

    @property
    def attention_scale(self) -> float:
        return self.attention_multiplier

    # -- the engine's vocabulary (the rest: Mamba2Vocabulary) --------------------------------
    @property
    def moe_intermediate_size(self) -> int:
        return self.intermediate_size


def _refuse_unsupported(raw: dict[str, Any], source: str) -> None:
    if raw.get("position_embedding_type") not in (None, "none"):
        raise UnsupportedModelError(
            f"{source}: position_embedding_type {raw['position_embedding_type']!r} is not supported "
            "(Granite-4.0-H without RoPE only)"
        )
    if raw.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(
            f"{source}: hidden_act {raw['hidden_act']!r} is not supported (silu only)"
        )
    for key in ("attention_bias", "mamba_proj_bias"):
        if raw.get(key):
            raise UnsupportedModelError(f"{source}: {key}=true is not supported (bias-free projections only)")
    if int(raw.get("num_local_experts", 8) or 0) < 1:
        raise UnsupportedModelError(f"{source}: Granite-4.0-H without experts is not supported")
    refuse_finite_time_step_limit(raw, source)


def _layer_types(raw: dict[str, Any], n: int, source: str) -> list[str]:
    names = {"mamba": "linear_attention", "attention": "full_attention"}
    types = [names.get(t, t) for t in (raw.get("layer_types") or ["linear_attention"] * n)]
    bad = sorted({t for t in types if t not in LAYER_TYPES})
    if bad:
        raise UnsupportedModelError(
            f"{source}: unsupported Granite-4.0-H layer types {bad}; supported: mamba (linear_attention), "
            "attention (full_attention)"
        )
    if len(types) != n:
        raise UnsupportedModelError(f"{source}: layer_types has {len(types)} entries, num_hidden_layers {n}")
    return types


def parse_granite_hybrid_config(raw: dict[str, Any], source: str = "config.json") -> GraniteHybridArch:
    """Validate a Granite-4.0-H config dict; refuse what evalkit cannot run (one line naming what is)."""
    if raw.get("model_type") not in GRANITE_MODEL_TYPES:
        raise UnsupportedModelError(f"{source}: model_type {raw.get('model_type')!r} is not Granite-4.0-H")
    _refuse_unsupported(raw, source)
    arch = GraniteHybridArch()
    same = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "shared_intermediate_size", "num_local_experts", "num_experts_per_tok",
            "max_position_embeddings")  # fmt: skip
    for name in same:
        if raw.get(name) is not None:
            setattr(arch, name, int(raw[name]))
    floats = (
        "rms_norm_eps",
        "embedding_multiplier",
        "residual_multiplier",
        "attention_multiplier",
        "logits_scaling",
    )
    for name in floats:
        if raw.get(name) is not None:
            setattr(arch, name, float(raw[name]))
    arch.tie_word_embeddings = bool(raw.get("tie_word_embeddings", False))
    arch.head_dim = int(raw.get("head_dim") or arch.hidden_size // arch.num_attention_heads)
    inner = int(float(raw.get("mamba_expand", 2)) * arch.hidden_size)
    read_mamba_fields(raw, arch, source, inner, "mamba_expand x hidden_size")
    if arch.num_attention_heads % arch.num_key_value_heads:
        raise UnsupportedModelError(f"{source}: num_attention_heads is not a multiple of num_key_value_heads")
    if not 1 <= arch.num_experts_per_tok <= arch.num_local_experts:
        raise UnsupportedModelError(f"{source}: num_experts_per_tok must be in 1..num_local_experts")
    arch.layer_types = _layer_types(raw, arch.num_hidden_layers, source)
    read_token_ids(raw, arch)
    arch.config_hash = config_hash(raw)
    return arch
