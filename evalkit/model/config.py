"""The architecture of a Kimi-Linear checkpoint, read from its `config.json` (one place, no guesses).

Field names follow transformers' `KimiLinearConfig`; the checkpoint spellings (`num_experts`,
`moe_renormalize`, `linear_attn_config`, ...) are accepted too. The layer pattern comes from the
config's lists (1-indexed `linear_attn_config.full_attn_layers` / `kda_layers`, or `layer_types`),
never from an "every fourth layer" rule (the released config lists them, 1-indexed)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import InputError

SUPPORTED_MODEL_TYPES = ("kimi_linear",)
SUPPORTED_ARCHITECTURES = ("KimiLinearForCausalLM",)


class UnsupportedModelError(InputError):
    """The checkpoint is not a Kimi-Linear model (or uses a variant evalkit cannot run)."""


# checkpoint key -> transformers attribute (transformers' attribute_map, reversed)
_ALIASES = {
    "num_experts": "num_local_experts",
    "num_experts_per_token": "num_experts_per_tok",
    "num_shared_experts": "n_shared_experts",
    "moe_renormalize": "norm_topk_prob",
    "num_expert_group": "n_group",
    "model_max_length": "max_position_embeddings",
}


class LayerKinds:
    """The engine's split of an architecture's `layer_types`: the layers with a recurrent state
    (served by the state pools) and those with a per-token cache (served by the paged cache)."""

    layer_types: list[str]
    # which op steps the recurrent state: the KDA kernels (KDA and GDN layers) unless a family says
    # otherwise (Mamba2: "ssd"); the drift probe names its kernels in a study's identity
    recurrence = "kda"

    @property
    def kda_layers(self) -> list[int]:
        """Layers with a recurrent state ("linear_attention": KDA or GDN)."""
        return [i for i, t in enumerate(self.layer_types) if t == "linear_attention"]

    @property
    def mla_layers(self) -> list[int]:
        """Layers with a per-token cache ("full_attention": MLA or gated attention)."""
        return [i for i, t in enumerate(self.layer_types) if t == "full_attention"]


@dataclass
class KimiArch(LayerKinds):
    """Everything the engine's math depends on, with transformers' defaults."""

    vocab_size: int = 163840
    hidden_size: int = 2304
    num_hidden_layers: int = 27
    intermediate_size: int = 9216
    moe_intermediate_size: int = 1024
    num_local_experts: int = 256
    num_experts_per_tok: int = 8
    n_shared_experts: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.446
    n_group: int = 1
    topk_group: int = 1
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-5
    num_attention_heads: int = 32
    q_lora_rank: int | None = None
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    linear_num_heads: int = 32
    linear_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    max_position_embeddings: int = 1048576
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 163584
    eos_token_id: list[int] = field(default_factory=lambda: [163586])
    pad_token_id: int | None = 163839
    layer_types: list[str] = field(default_factory=list)  # "linear_attention" | "full_attention"
    mlp_layer_types: list[str] = field(default_factory=list)  # "dense" | "sparse"
    config_hash: str = ""

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def kda_dim(self) -> int:
        return self.linear_num_heads * self.linear_head_dim

    @property
    def mla_latent_dim(self) -> int:
        """Per-token MLA cache width: the normalised latent c plus the shared k_rot."""
        return self.kv_lora_rank + self.qk_rope_head_dim


def config_hash(raw: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of config.json (key order and whitespace do not matter)."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _layer_types(raw: dict[str, Any], n_layers: int) -> list[str]:
    lac = raw.get("linear_attn_config") or {}
    if raw.get("layer_types"):
        types = list(raw["layer_types"])
    elif "full_attn_layers" in lac and "kda_layers" in lac:
        types = [None] * n_layers
        for i in lac["full_attn_layers"]:
            types[int(i) - 1] = "full_attention"  # 1-indexed in the checkpoint
        for i in lac["kda_layers"]:
            types[int(i) - 1] = "linear_attention"
        if any(t is None for t in types):
            missing = [i + 1 for i, t in enumerate(types) if t is None]
            raise UnsupportedModelError(
                f"linear_attn_config puts layers {missing} (1-indexed) in neither full_attn_layers"
                " nor kda_layers"
            )
    else:
        # transformers' fallback; the real checkpoints always carry the lists
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n_layers)]
    if len(types) != n_layers:
        raise UnsupportedModelError(
            f"layer_types has {len(types)} entries but num_hidden_layers = {n_layers}"
        )
    bad = sorted({t for t in types if t not in ("linear_attention", "full_attention")})
    if bad:
        raise UnsupportedModelError(f"unknown layer types {bad}; expected linear_attention / full_attention")
    return types


def _coerce(default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def parse_config(raw: dict[str, Any], source: str = "config.json") -> KimiArch:
    """Validate a Kimi-Linear config dict and return its architecture; refuse anything else."""
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"{source}: model_type {model_type!r} is not supported; evalkit runs Kimi-Linear checkpoints "
            f"(model_type {SUPPORTED_MODEL_TYPES[0]!r})"
        )
    archs = raw.get("architectures") or list(SUPPORTED_ARCHITECTURES)
    if not any(a in SUPPORTED_ARCHITECTURES for a in archs):
        raise UnsupportedModelError(
            f"{source}: architectures {archs} are not supported (need KimiLinearForCausalLM)"
        )
    vals: dict[str, Any] = {}
    for key, value in raw.items():
        vals[_ALIASES.get(key, key)] = value
    lac = raw.get("linear_attn_config") or {}
    arch = KimiArch()
    for name in arch.__dataclass_fields__:
        if name in ("layer_types", "mlp_layer_types", "eos_token_id", "config_hash"):
            continue
        if name in vals and vals[name] is not None:
            setattr(arch, name, _coerce(getattr(arch, name), vals[name]))
    arch.linear_num_heads = int(lac.get("num_heads", vals.get("linear_num_heads", arch.linear_num_heads)))
    arch.linear_head_dim = int(lac.get("head_dim", vals.get("linear_head_dim", arch.linear_head_dim)))
    arch.linear_conv_kernel_dim = int(
        lac.get("short_conv_kernel_size", vals.get("linear_conv_kernel_dim", arch.linear_conv_kernel_dim))
    )
    if arch.q_lora_rank is not None:
        raise UnsupportedModelError(
            f"{source}: q_lora_rank={arch.q_lora_rank} (a low-rank MLA query) is not supported"
        )
    eos = vals.get("eos_token_id", [163586])
    arch.eos_token_id = [int(e) for e in (eos if isinstance(eos, list) else [eos])] if eos is not None else []
    n = arch.num_hidden_layers
    arch.layer_types = _layer_types(raw, n)
    if raw.get("mlp_layer_types"):
        arch.mlp_layer_types = list(raw["mlp_layer_types"])
    else:
        k = int(raw.get("first_k_dense_replace", 1))
        arch.mlp_layer_types = ["dense" if i < k else "sparse" for i in range(n)]
    if len(arch.mlp_layer_types) != n or any(t not in ("dense", "sparse") for t in arch.mlp_layer_types):
        raise UnsupportedModelError(
            f"{source}: mlp_layer_types must list 'dense'/'sparse' for each of {n} layers"
        )
    if arch.hidden_act != "silu":
        raise UnsupportedModelError(f"{source}: hidden_act {arch.hidden_act!r} is not supported (only silu)")
    arch.config_hash = config_hash(raw)
    return arch
