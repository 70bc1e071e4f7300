"""Which recurrence the reference model uses: `kda` (transformers' `KimiLinearForCausalLM`, pure
KDA, per-channel decay) or `gdn` (transformers' `Qwen3_5ForCausalLM` with every layer Gated
DeltaNet, one decay per head). Same sizes, tokenizer, data and loss, so the two models can be
compared on the same questions for how their state's precision matters."""

from __future__ import annotations

from typing import Any

from evalkit.refmodel.kimi_config import model_config as kda_config
from evalkit.refmodel.settings import Settings

ARCHES = ("kda", "gdn")
MODEL_TYPES = {"kda": "kimi_linear", "gdn": "qwen3_5_text"}
DESCRIPTIONS = {
    "kda": "pure-KDA Kimi-Linear (per-channel decay gate)",
    "gdn": "pure Gated DeltaNet Qwen3.5 (one scalar decay per head)",
}


def gdn_config(s: Settings, vocab_size: int) -> Any:
    """A Qwen3.5 text config with Gated DeltaNet at every layer: `heads` key and value heads of
    `head_dim` (no grouped value heads, so the state has KDA's shape), dense SwiGLU MLPs."""
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=vocab_size,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        layer_types=["linear_attention"] * s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.heads,
        head_dim=s.head_dim,
        linear_num_key_heads=s.heads,
        linear_num_value_heads=s.heads,
        linear_key_head_dim=s.head_dim,
        linear_value_head_dim=s.head_dim,
        linear_conv_kernel_dim=s.conv_kernel,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=False,
    )


def model_config(s: Settings, vocab_size: int) -> Any:
    """The transformers config of the reference model of architecture `s.arch`."""
    if s.arch == "kda":
        return kda_config(s, vocab_size)
    if s.arch == "gdn":
        return gdn_config(s, vocab_size)
    raise ValueError(f"arch must be one of {ARCHES}, got {s.arch!r}")


def build_model(s: Settings, vocab_size: int) -> Any:
    """transformers' own causal LM of `s.arch` with fresh weights (what training updates)."""
    from transformers import KimiLinearForCausalLM, Qwen3_5ForCausalLM

    if s.arch == "gdn":
        from evalkit.refmodel.gdn_on_kda import route_gdn_through_kda

        route_gdn_through_kda()
    cls = KimiLinearForCausalLM if s.arch == "kda" else Qwen3_5ForCausalLM
    return cls(model_config(s, vocab_size))
