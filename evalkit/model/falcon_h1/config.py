"""The architecture of a Falcon-H1 checkpoint (transformers' `falcon_h1`; mamba2.md §1, §7), read
from its `config.json`. Every layer is "hybrid": it holds a Mamba2 state and K/V rows, so it is in
both of the engine's lists (`kda_layers` and `mla_layers`, the pools keyed by layer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..bamba.config import refuse_biases_and_activation
from ..config import LayerKinds, UnsupportedModelError, config_hash
from ..nemotron_h.config import Mamba2Vocabulary, read_mamba_fields, read_token_ids
from ..qwen3_next.config import _rope

FALCON_H1_MODEL_TYPES = {"falcon_h1": "falcon_h1"}
_MULTIPLIERS = (
    "embedding_multiplier",
    "lm_head_multiplier",
    "key_multiplier",
    "attention_in_multiplier",
    "attention_out_multiplier",
    "ssm_in_multiplier",
    "ssm_out_multiplier",
)


@dataclass
class FalconH1Arch(Mamba2Vocabulary, LayerKinds):
    """Everything the math depends on (defaults: transformers' FalconH1Config)."""

    family: str = "falcon_h1"
    vocab_size: int = 128000
    hidden_size: int = 4096
    num_hidden_layers: int = 32
    rms_norm_eps: float = 1e-5
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 14336
    mamba_num_heads: int = 128
    mamba_head_dim: int = 8
    ssm_state_size: int = 256
    n_groups: int = 1
    conv_kernel: int = 4
    use_conv_bias: bool = True
    mamba_inner: int = 1024  # mamba_d_ssm, else mamba_expand x hidden_size
    mamba_rms_norm: bool = False  # False: y * silu(z), no norm
    mamba_norm_before_gate: bool = True
    rope_theta: float = 10000.0
    embedding_multiplier: float = 1.0
    lm_head_multiplier: float = 1.0
    key_multiplier: float = 1.0
    attention_in_multiplier: float = 1.0
    attention_out_multiplier: float = 1.0
    ssm_in_multiplier: float = 1.0
    ssm_out_multiplier: float = 1.0
    ssm_multipliers: list[float] = field(default_factory=lambda: [1.0] * 5)  # z, x, B, C, dt rows
    mlp_multipliers: list[float] = field(default_factory=lambda: [1.0, 1.0])  # gate, down
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    layer_types: list[str] = field(default_factory=list)  # all "hybrid"
    config_hash: str = ""

    # -- the Mamba2 mixer and attention (NemotronH's names) ------------------------------------
    @property
    def layer_norm_epsilon(self) -> float:
        """The gated norm's eps (Falcon-H1's rms_norm_eps)."""
        return self.rms_norm_eps

    @property
    def attention_scale(self) -> float:
        return self.head_dim**-0.5

    # -- the engine's vocabulary (the rest: Mamba2Vocabulary) --------------------------------
    @property
    def kda_layers(self) -> list[int]:
        """Every layer has a Mamba2 state."""
        return list(range(self.num_hidden_layers))

    @property
    def mla_layers(self) -> list[int]:
        """Every layer has attention K/V rows."""
        return list(range(self.num_hidden_layers))

    @property
    def num_experts_per_tok(self) -> int:
        """One dense MLP per token (the memory estimate's activation term)."""
        return 1

    @property
    def moe_intermediate_size(self) -> int:
        return self.intermediate_size


def _float_list(raw: dict[str, Any], key: str, n: int, source: str) -> list[float] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != n:
        raise UnsupportedModelError(f"{source}: {key} must be a list of {n} numbers, got {value!r}")
    return [float(v) for v in value]


def parse_falcon_h1_config(raw: dict[str, Any], source: str = "config.json") -> FalconH1Arch:
    """Validate a Falcon-H1 config dict; refuse what evalkit cannot run (one line naming what is)."""
    if raw.get("model_type") not in FALCON_H1_MODEL_TYPES:
        raise UnsupportedModelError(f"{source}: model_type {raw.get('model_type')!r} is not Falcon-H1")
    biases = ("attention_bias", "mlp_bias", "mamba_proj_bias", "projectors_bias")
    refuse_biases_and_activation(raw, source, biases)
    arch = FalconH1Arch()
    ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "max_position_embeddings")  # fmt: skip
    for name in ints:
        if raw.get(name) is not None:
            setattr(arch, name, int(raw[name]))
    if "num_key_value_heads" in raw and raw["num_key_value_heads"] is None:
        arch.num_key_value_heads = arch.num_attention_heads  # transformers' fallback for null
    for name in ("rms_norm_eps", *_MULTIPLIERS):
        if raw.get(name) is not None:
            setattr(arch, name, float(raw[name]))
    arch.ssm_multipliers = _float_list(raw, "ssm_multipliers", 5, source) or arch.ssm_multipliers
    arch.mlp_multipliers = _float_list(raw, "mlp_multipliers", 2, source) or arch.mlp_multipliers
    arch.mamba_rms_norm = bool(raw.get("mamba_rms_norm", False))
    arch.mamba_norm_before_gate = bool(raw.get("mamba_norm_before_gate", True))
    arch.tie_word_embeddings = bool(raw.get("tie_word_embeddings", False))
    arch.head_dim = int(raw.get("head_dim") or arch.hidden_size // arch.num_attention_heads)
    arch.rope_theta, _ = _rope(raw, source)  # Falcon-H1 rotates every dim of a head
    d_ssm = raw.get("mamba_d_ssm", 1024)  # transformers' default when absent; null: expand x hidden
    if d_ssm is not None:
        inner, inner_name = int(d_ssm), "mamba_d_ssm"
    else:
        inner, inner_name = (
            int(float(raw.get("mamba_expand", 2)) * arch.hidden_size),
            "mamba_expand x hidden_size",
        )
    read_mamba_fields(raw, arch, source, inner, inner_name)
    if arch.num_attention_heads % arch.num_key_value_heads:
        raise UnsupportedModelError(f"{source}: num_attention_heads is not a multiple of num_key_value_heads")
    arch.layer_types = ["hybrid"] * arch.num_hidden_layers
    read_token_ids(raw, arch)
    arch.config_hash = config_hash(raw)
    return arch
