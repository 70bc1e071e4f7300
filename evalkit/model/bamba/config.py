"""The architecture of a Bamba checkpoint (transformers' `bamba`; mamba2.md §1, §7), read from its
`config.json`. `BambaArch` answers the Mamba2 mixer and attention under NemotronH's names and the
engine in its KDA/MLA vocabulary (Mamba2 layers are `kda_layers`, attention layers `mla_layers`)."""

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
from ..qwen3_next.config import _rope

BAMBA_MODEL_TYPES = {"bamba": "bamba"}


@dataclass
class BambaArch(Mamba2Vocabulary, LayerKinds):
    """Everything the math depends on (defaults: transformers' BambaConfig)."""

    family: str = "bamba"
    vocab_size: int = 128000
    hidden_size: int = 4096
    num_hidden_layers: int = 32
    rms_norm_eps: float = 1e-5
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 14336
    mamba_num_heads: int = 128
    mamba_head_dim: int = 64
    ssm_state_size: int = 256
    n_groups: int = 1
    conv_kernel: int = 4
    use_conv_bias: bool = True
    mamba_inner: int = 8192
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.5  # transformers hard-codes it unless rope_parameters say
    max_position_embeddings: int = 262144
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    layer_types: list[str] = field(default_factory=list)
    config_hash: str = ""

    # -- the Mamba2 mixer and attention (NemotronH's names) ------------------------------------
    @property
    def layer_norm_epsilon(self) -> float:
        """The gated norm's eps (Bamba's rms_norm_eps)."""
        return self.rms_norm_eps

    @property
    def attention_scale(self) -> float:
        return self.head_dim**-0.5

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    # -- the engine's vocabulary (the rest: Mamba2Vocabulary) --------------------------------
    @property
    def num_experts_per_tok(self) -> int:
        """One dense MLP per token (the memory estimate's activation term)."""
        return 1

    @property
    def moe_intermediate_size(self) -> int:
        return self.intermediate_size


def refuse_biases_and_activation(raw: dict[str, Any], source: str, biases: tuple[str, ...]) -> None:
    """SiLU conv and MLP activation, no projection biases (what the shared layers compute)."""
    if raw.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(
            f"{source}: hidden_act {raw['hidden_act']!r} is not supported (silu only)"
        )
    for key in biases:
        if raw.get(key):
            raise UnsupportedModelError(f"{source}: {key}=true is not supported (bias-free projections only)")
    refuse_finite_time_step_limit(raw, source)


def _layer_types(raw: dict[str, Any], n: int, source: str) -> list[str]:
    attn = [int(i) for i in raw.get("attn_layer_indices") or []]
    bad = sorted(i for i in attn if not 0 <= i < n)
    if bad:
        raise UnsupportedModelError(f"{source}: attn_layer_indices {bad} are not layers 0..{n - 1}")
    return ["full_attention" if i in attn else "linear_attention" for i in range(n)]


def parse_bamba_config(raw: dict[str, Any], source: str = "config.json") -> BambaArch:
    """Validate a Bamba config dict; refuse what evalkit cannot run (one line naming what is)."""
    if raw.get("model_type") not in BAMBA_MODEL_TYPES:
        raise UnsupportedModelError(f"{source}: model_type {raw.get('model_type')!r} is not Bamba")
    refuse_biases_and_activation(raw, source, ("attention_bias", "mlp_bias", "mamba_proj_bias"))
    arch = BambaArch()
    ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "max_position_embeddings")  # fmt: skip
    for name in ints:
        if raw.get(name) is not None:
            setattr(arch, name, int(raw[name]))
    if "num_key_value_heads" in raw and raw["num_key_value_heads"] is None:
        arch.num_key_value_heads = arch.num_attention_heads  # transformers' fallback for null
    if raw.get("rms_norm_eps") is not None:
        arch.rms_norm_eps = float(raw["rms_norm_eps"])
    arch.tie_word_embeddings = bool(raw.get("tie_word_embeddings", False))
    arch.head_dim = int(raw.get("head_dim") or arch.hidden_size // arch.num_attention_heads)
    arch.rope_theta, arch.partial_rotary_factor = _rope(raw, source, default_factor=0.5)
    inner = int(float(raw.get("mamba_expand", 2)) * arch.hidden_size)
    read_mamba_fields(raw, arch, source, inner, "mamba_expand x hidden_size")
    if arch.num_attention_heads % arch.num_key_value_heads:
        raise UnsupportedModelError(f"{source}: num_attention_heads is not a multiple of num_key_value_heads")
    arch.layer_types = _layer_types(raw, arch.num_hidden_layers, source)
    read_token_ids(raw, arch)
    arch.config_hash = config_hash(raw)
    return arch
