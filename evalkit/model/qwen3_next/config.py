"""The architecture of a Gated DeltaNet checkpoint (transformers' `qwen3_next`, `qwen3_5`,
`qwen3_5_moe`; gated-deltanet.md §1, §6), read from its `config.json`.

A Qwen3.5 release is a vision-language checkpoint (`model_type` `qwen3_5`/`qwen3_5_moe` with a
`text_config`); only its text model is run. `GDNArch` also answers the engine's questions under the
names the engine asks them (`kda_layers`, `mla_layers`, `mla_latent_dim`, ...): the engine's
recurrent-state pools serve the GDN layers and its paged cache holds the full-attention K and V."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import LayerKinds, UnsupportedModelError, config_hash

# model_type -> family; the *_text types are the text configs transformers writes for ForCausalLM
GDN_MODEL_TYPES = {
    "qwen3_next": "qwen3_next",
    "qwen3_5": "qwen3_5",
    "qwen3_5_text": "qwen3_5",
    "qwen3_5_moe": "qwen3_5_moe",
    "qwen3_5_moe_text": "qwen3_5_moe",
}


class GQACacheVocabulary:
    """The engine's cache vocabulary for gated-attention/GQA layers whose cache row holds, per KV
    head, its value then its key (`attention.py`); shared by every family that reuses that layer."""

    @property
    def mla_latent_dim(self) -> int:
        """Cache width per token: per KV head its value then its key."""
        return 2 * self.num_key_value_heads * self.head_dim

    @property
    def qk_head_dim(self) -> int:
        return self.head_dim

    @property
    def v_head_dim(self) -> int:
        return self.head_dim


@dataclass
class GDNArch(GQACacheVocabulary, LayerKinds):
    """Everything the math depends on (defaults: transformers' Qwen3NextConfig)."""

    family: str = "qwen3_next"
    vocab_size: int = 151936
    hidden_size: int = 2048
    num_hidden_layers: int = 48
    intermediate_size: int = 5632
    num_attention_heads: int = 16
    num_key_value_heads: int = 2
    head_dim: int = 256
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.25
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    num_experts: int = 512
    num_experts_per_tok: int = 10
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    norm_topk_prob: bool = True
    bos_token_id: int | None = None
    eos_token_id: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    layer_types: list[str] = field(default_factory=list)  # "linear_attention" | "full_attention"
    mlp_layer_types: list[str] = field(default_factory=list)  # "dense" | "sparse"
    config_hash: str = ""

    # -- the engine's vocabulary --------------------------------------------------------------

    @property
    def linear_num_heads(self) -> int:
        return self.linear_num_value_heads

    @property
    def linear_head_dim(self) -> int:
        return self.linear_key_head_dim

    @property
    def kda_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_key_head_dim

    @property
    def recurrent_state_shape(self) -> tuple[int, int, int]:
        """One sequence's state per layer: [Hv, dk rows, dv cols]."""
        return (self.linear_num_value_heads, self.linear_key_head_dim, self.linear_value_head_dim)

    @property
    def conv_dim(self) -> int:
        """Channels of the short conv: q and k (key heads) and v (value heads)."""
        k = self.linear_num_key_heads * self.linear_key_head_dim
        return 2 * k + self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def num_local_experts(self) -> int:
        return self.num_experts

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)


_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "max_position_embeddings",
)


# where transformers' Qwen3.5 config defaults differ from Qwen3NextConfig's (gated-deltanet.md §1)
_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen3_5": dict(vocab_size=248320, hidden_size=4096, num_hidden_layers=32, num_key_value_heads=4,
                    intermediate_size=12288),
    "qwen3_5_moe": dict(vocab_size=248320, num_hidden_layers=40, num_experts=256, num_experts_per_tok=8),
}  # fmt: skip


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The text model's fields: `text_config` of a VLM checkpoint (top-level ids fill gaps)."""
    if not isinstance(raw.get("text_config"), dict):
        return raw
    text = dict(raw["text_config"])
    for key in ("tie_word_embeddings", "eos_token_id", "bos_token_id", "pad_token_id"):
        if text.get(key) is None and raw.get(key) is not None:
            text[key] = raw[key]
    return text


def _rope(text: dict[str, Any], source: str, default_factor: float = 0.25) -> tuple[float, float]:
    """(rope_theta, partial_rotary_factor) of a config; rope scaling is refused (one line)."""
    params = dict(text.get("rope_parameters") or {})
    legacy = text.get("rope_scaling") or {}
    rope_type = params.get("rope_type", legacy.get("rope_type", legacy.get("type", "default")))
    if rope_type != "default":
        raise UnsupportedModelError(f"{source}: rope_type {rope_type!r} is not supported (only 'default')")
    theta = params.get("rope_theta", text.get("rope_theta", 10000.0))
    factor = params.get("partial_rotary_factor", text.get("partial_rotary_factor", default_factor))
    return float(theta), float(factor)


def _layer_types(text: dict[str, Any], n: int, source: str) -> list[str]:
    if text.get("layer_types"):
        types = list(text["layer_types"])
    else:
        every = int(text.get("full_attention_interval", 4))
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    if len(types) != n:
        raise UnsupportedModelError(f"{source}: layer_types has {len(types)} entries, num_hidden_layers {n}")
    bad = sorted({t for t in types if t not in ("linear_attention", "full_attention")})
    if bad:
        raise UnsupportedModelError(f"{source}: unknown layer types {bad} (linear/full_attention)")
    return types


def _mlp_layer_types(family: str, text: dict[str, Any], n: int) -> list[str]:
    if family == "qwen3_5":
        return ["dense"] * n
    if family == "qwen3_5_moe":
        return ["sparse"] * n
    only = set(text.get("mlp_only_layers") or [])
    step = int(text.get("decoder_sparse_step", 1))
    experts = int(text.get("num_experts", 512))
    return ["sparse" if i not in only and experts > 0 and (i + 1) % step == 0 else "dense" for i in range(n)]


def _refuse_unsupported(text: dict[str, Any], source: str) -> None:
    if text.get("attention_bias"):
        raise UnsupportedModelError(f"{source}: attention_bias=true is not supported")
    if text.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(
            f"{source}: hidden_act {text['hidden_act']!r} is not supported (silu only)"
        )
    if text.get("attn_output_gate", True) is not True:
        raise UnsupportedModelError(f"{source}: attn_output_gate=false is not supported")
    for key in ("use_sliding_window", "linear_allow_neg_eigval"):
        if text.get(key):
            raise UnsupportedModelError(f"{source}: {key}=true is not supported")


def parse_gdn_config(raw: dict[str, Any], source: str = "config.json") -> GDNArch:
    """Validate a Qwen3-Next / Qwen3.5 / Qwen3.5-MoE config dict; refuse what evalkit cannot run."""
    family = GDN_MODEL_TYPES.get(str(raw.get("model_type")))
    if family is None:
        raise UnsupportedModelError(f"{source}: model_type {raw.get('model_type')!r} is not a GDN model")
    text = _text_config(raw)
    _refuse_unsupported(text, source)
    arch = GDNArch(family=family, **_FAMILY_DEFAULTS.get(family, {}))
    for name in _INT_FIELDS:
        if text.get(name) is not None:
            setattr(arch, name, int(text[name]))
    arch.rms_norm_eps = float(text.get("rms_norm_eps", arch.rms_norm_eps))
    arch.head_dim = int(text.get("head_dim", 256) or arch.hidden_size // arch.num_attention_heads)
    arch.tie_word_embeddings = bool(text.get("tie_word_embeddings", False))
    arch.rope_theta, arch.partial_rotary_factor = _rope(text, source)
    if family == "qwen3_5":
        arch.num_experts = arch.num_experts_per_tok = 0
        arch.moe_intermediate_size = arch.shared_expert_intermediate_size = 0
    else:
        for name in ("num_experts", "num_experts_per_tok", "moe_intermediate_size"):
            if text.get(name) is not None:
                setattr(arch, name, int(text[name]))
        arch.shared_expert_intermediate_size = int(
            text.get("shared_expert_intermediate_size", arch.shared_expert_intermediate_size)
        )
        arch.norm_topk_prob = family == "qwen3_5_moe" or bool(text.get("norm_topk_prob", True))
    if family != "qwen3_5_moe" and text.get("intermediate_size") is not None:
        arch.intermediate_size = int(text["intermediate_size"])
    if arch.linear_num_value_heads % arch.linear_num_key_heads:
        raise UnsupportedModelError(
            f"{source}: linear_num_value_heads ({arch.linear_num_value_heads}) must be a multiple of "
            f"linear_num_key_heads ({arch.linear_num_key_heads})"
        )
    if arch.num_attention_heads % arch.num_key_value_heads:
        raise UnsupportedModelError(f"{source}: num_attention_heads is not a multiple of num_key_value_heads")
    if arch.rotary_dim % 2:
        raise UnsupportedModelError(f"{source}: the rotary dim head_dim*partial_rotary_factor must be even")
    for key in ("bos_token_id", "pad_token_id"):
        if text.get(key) is not None:
            setattr(arch, key, int(text[key]))
    eos = text.get("eos_token_id")
    arch.eos_token_id = [] if eos is None else [int(e) for e in (eos if isinstance(eos, list) else [eos])]
    n = arch.num_hidden_layers
    arch.layer_types = _layer_types(text, n, source)
    arch.mlp_layer_types = _mlp_layer_types(family, text, n)
    arch.config_hash = config_hash(raw)
    return arch
