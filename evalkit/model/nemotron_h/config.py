"""The architecture of a NemotronH checkpoint (transformers' `nemotron_h`; mamba2.md §1, §7),
read from its `config.json`.

One mixer per block: `layers_block_type` (or the legacy `hybrid_override_pattern`, "M*E-") names
each block's mixer: "linear_attention" (Mamba2), "full_attention", "moe" or "mlp". `NemotronHArch`
answers the engine under the names the engine asks (`kda_layers` = the Mamba2 blocks, whose state
[H, P, N] and conv channels I + 2GN the recurrent pools hold; `mla_layers` = the attention blocks,
K and V in the paged cache)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..config import LayerKinds, UnsupportedModelError, config_hash
from ..qwen3_next.config import GQACacheVocabulary

MAMBA2_MODEL_TYPES = {"nemotron_h": "nemotron_h"}
BLOCK_TYPES = ("linear_attention", "full_attention", "moe", "mlp")
PATTERN_CHARS = {"M": "linear_attention", "*": "full_attention", "E": "moe", "-": "mlp"}
# model types of the family that run only through a server (named in the refusal)
SERVER_ONLY = ("mamba", "mamba2")


class Mamba2Vocabulary(GQACacheVocabulary):
    """The engine's vocabulary (its KDA/MLA names) for an arch of Mamba2 mixers and GQA attention
    layers; NemotronH, Granite-4.0-H, Bamba and Falcon-H1 share both layers, so they share these
    answers."""

    recurrence = "ssd"  # LayerKinds.recurrence: the SSD kernels step the state

    @property
    def recurrent_state_shape(self) -> tuple[int, int, int]:
        """One sequence's SSM state per Mamba2 layer: [H, P, N] (transformers' layout)."""
        return (self.mamba_num_heads, self.mamba_head_dim, self.ssm_state_size)

    @property
    def conv_dim(self) -> int:
        """Channels of the short conv: x (I), B and C (G*N each)."""
        return self.mamba_inner + 2 * self.n_groups * self.ssm_state_size

    @property
    def linear_num_heads(self) -> int:
        return self.mamba_num_heads

    @property
    def linear_head_dim(self) -> int:
        """The memory estimate's per-head state side: sqrt(P*N) gives its H*P*N bytes."""
        return math.isqrt(self.mamba_head_dim * self.ssm_state_size)

    @property
    def linear_conv_kernel_dim(self) -> int:
        return self.conv_kernel

    @property
    def kda_dim(self) -> int:
        return self.mamba_inner


@dataclass
class NemotronHArch(Mamba2Vocabulary, LayerKinds):
    """Everything the math depends on (defaults: transformers' NemotronHConfig)."""

    family: str = "nemotron_h"
    vocab_size: int = 131072
    hidden_size: int = 4096
    num_hidden_layers: int = 52
    layer_norm_epsilon: float = 1e-5
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 21504
    mamba_num_heads: int = 128
    mamba_head_dim: int = 64
    ssm_state_size: int = 128
    n_groups: int = 8
    conv_kernel: int = 4
    use_conv_bias: bool = True
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 7688
    moe_shared_expert_intermediate_size: int = 7688
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False  # NemotronH never ties (transformers ignores the flag)
    bos_token_id: int | None = None
    eos_token_id: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    layer_types: list[str] = field(default_factory=list)
    config_hash: str = ""

    # -- the Mamba2 mixer ---------------------------------------------------------------------
    @property
    def mamba_inner(self) -> int:
        """I = H * P (NemotronH ignores `expand`)."""
        return self.mamba_num_heads * self.mamba_head_dim

    # -- the engine's vocabulary --------------------------------------------------------------

    @property
    def attention_scale(self) -> float:
        return self.head_dim**-0.5

    @property
    def num_local_experts(self) -> int:
        return self.n_routed_experts


_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "mamba_num_heads",
    "mamba_head_dim",
    "ssm_state_size",
    "n_groups",
    "conv_kernel",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "n_group",
    "topk_group",
    "max_position_embeddings",
)
# transformers' legacy spellings (NemotronHConfig accepts both)
_LEGACY = {
    "mamba_n_heads": "mamba_num_heads",
    "mamba_d_head": "mamba_head_dim",
    "mamba_d_state": "ssm_state_size",
    "mamba_n_groups": "n_groups",
    "mamba_d_conv": "conv_kernel",
    "mamba_conv_bias": "use_conv_bias",
    "mamba_dt_limit": "time_step_limit",
}


def _block_types(raw: dict[str, Any], source: str) -> list[str]:
    if raw.get("layers_block_type"):
        types = list(raw["layers_block_type"])
        types = [{"mamba": "linear_attention", "attention": "full_attention"}.get(t, t) for t in types]
    elif raw.get("hybrid_override_pattern"):
        pattern = str(raw["hybrid_override_pattern"])
        bad = sorted(set(pattern) - set(PATTERN_CHARS))
        if bad:
            raise UnsupportedModelError(
                f"{source}: hybrid_override_pattern has unknown blocks {bad}; supported: "
                "M (Mamba2), * (attention), E (MoE), - (MLP)"
            )
        types = [PATTERN_CHARS[c] for c in pattern]
    else:
        raise UnsupportedModelError(f"{source}: a nemotron_h config needs layers_block_type")
    bad = sorted({t for t in types if t not in BLOCK_TYPES})
    if bad:
        raise UnsupportedModelError(
            f"{source}: unsupported NemotronH block types {bad}; supported: {', '.join(BLOCK_TYPES)}"
        )
    n = raw.get("num_hidden_layers")
    if n is not None and int(n) != len(types):
        raise UnsupportedModelError(
            f"{source}: layers_block_type has {len(types)} blocks, num_hidden_layers {n}"
        )
    return types


def _refuse_unsupported(raw: dict[str, Any], source: str) -> None:
    checks = {
        "mamba_hidden_act": ("silu", "the Mamba2 conv activation must be silu"),
        "mlp_hidden_act": ("relu2", "mlp_hidden_act must be relu2"),
    }
    for key, (want, why) in checks.items():
        if raw.get(key, want) != want:
            raise UnsupportedModelError(f"{source}: {key}={raw[key]!r} is not supported ({why})")
    for key in ("use_bias", "mamba_proj_bias", "attention_bias", "mlp_bias"):
        if raw.get(key):
            raise UnsupportedModelError(f"{source}: {key}=true is not supported (bias-free projections only)")
    if raw.get("moe_latent_size") is not None:
        raise UnsupportedModelError(
            f"{source}: moe_latent_size is not supported (experts on the hidden size)"
        )
    refuse_finite_time_step_limit(raw, source)


def refuse_finite_time_step_limit(raw: dict[str, Any], source: str) -> None:
    """Only (0, inf): transformers clamps dt to a finite limit in prefill but not in decode
    (mamba2.md §6), so no single reading of such a checkpoint is right."""
    limit = raw.get("time_step_limit", (0.0, float("inf")))
    lo = float(limit[0]) if limit else 0.0
    hi = limit[1] if limit else float("inf")
    hi = float("inf") if isinstance(hi, dict) else float(hi)  # config.json spells inf {"__float__": ...}
    if lo > 0.0 or hi != float("inf"):
        raise UnsupportedModelError(
            f"{source}: a finite time_step_limit {list(limit)} is not supported: transformers clamps dt in "
            "prefill but not in decode, so no single reading is right; only (0, inf)"
        )


def read_mamba_fields(raw: dict[str, Any], arch, source: str, inner: int, inner_name: str) -> None:
    """The mixer's fields from the `mamba_*` spelling of Granite-4.0-H, Bamba and Falcon-H1
    (mamba2.md §1): H, N, G, K, the conv bias, I = `inner` and P (`mamba_d_head`, "auto" = I/H).
    Refuses H x P != I and groups that do not divide H (transformers fails later, less clearly)."""
    names = {"mamba_n_heads": "mamba_num_heads", "mamba_d_state": "ssm_state_size",
             "mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel"}  # fmt: skip
    for key, name in names.items():
        if raw.get(key) is not None:
            setattr(arch, name, int(raw[key]))
    arch.use_conv_bias = bool(raw.get("mamba_conv_bias", True))
    arch.mamba_inner = inner
    d_head = raw.get("mamba_d_head", "auto")
    arch.mamba_head_dim = inner // arch.mamba_num_heads if d_head in (None, "auto") else int(d_head)
    H, P, G = arch.mamba_num_heads, arch.mamba_head_dim, arch.n_groups
    if H * P != inner:
        raise UnsupportedModelError(
            f"{source}: mamba_n_heads x mamba_d_head ({H} x {P}) must equal {inner_name} ({inner})"
        )
    if G < 1 or H % G:
        raise UnsupportedModelError(f"{source}: mamba_n_groups ({G}) must divide mamba_n_heads ({H})")


def read_token_ids(raw: dict[str, Any], arch) -> None:
    """bos / pad (one id or none) and eos (a list, possibly empty)."""
    for key in ("bos_token_id", "pad_token_id"):
        if raw.get(key) is not None:
            setattr(arch, key, int(raw[key]))
    eos = raw.get("eos_token_id")
    arch.eos_token_id = [] if eos is None else [int(e) for e in (eos if isinstance(eos, list) else [eos])]


def parse_nemotron_h_config(raw: dict[str, Any], source: str = "config.json") -> NemotronHArch:
    """Validate a NemotronH config dict; refuse what evalkit cannot run (one line naming what is)."""
    if raw.get("model_type") not in MAMBA2_MODEL_TYPES:
        raise UnsupportedModelError(
            f"{source}: model_type {raw.get('model_type')!r} is not a NemotronH model"
        )
    original, raw = raw, {_LEGACY.get(k, k): v for k, v in raw.items()}
    _refuse_unsupported(raw, source)
    arch = NemotronHArch()
    for name in _INT_FIELDS:
        if raw.get(name) is not None:
            setattr(arch, name, int(raw[name]))
    for name in ("layer_norm_epsilon", "routed_scaling_factor"):
        if raw.get(name) is not None:
            setattr(arch, name, float(raw[name]))
    arch.use_conv_bias = bool(raw.get("use_conv_bias", True))
    arch.norm_topk_prob = bool(raw.get("norm_topk_prob", True))
    arch.layer_types = _block_types(raw, source)
    arch.num_hidden_layers = len(arch.layer_types)
    H, G = arch.mamba_num_heads, arch.n_groups
    if G < 1 or H % G:
        raise UnsupportedModelError(f"{source}: n_groups ({G}) must divide mamba_num_heads ({H})")
    if arch.num_attention_heads % arch.num_key_value_heads:
        raise UnsupportedModelError(f"{source}: num_attention_heads is not a multiple of num_key_value_heads")
    if "moe" in arch.layer_types:
        E = arch.n_routed_experts
        if arch.n_group < 1 or E % arch.n_group or not 1 <= arch.topk_group <= arch.n_group:
            raise UnsupportedModelError(f"{source}: n_group/topk_group do not split the {E} experts")
        if not 1 <= arch.num_experts_per_tok <= E:
            raise UnsupportedModelError(f"{source}: num_experts_per_tok must be in 1..n_routed_experts ({E})")
    for key in ("bos_token_id", "pad_token_id"):
        if raw.get(key) is not None:
            setattr(arch, key, int(raw[key]))
    eos = raw.get("eos_token_id")
    arch.eos_token_id = [] if eos is None else [int(e) for e in (eos if isinstance(eos, list) else [eos])]
    arch.config_hash = config_hash(original)
    return arch
