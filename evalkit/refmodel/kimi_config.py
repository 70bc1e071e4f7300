"""transformers' `KimiLinearConfig` for the models evalkit builds itself: one builder serves the
pure-KDA reference model and the tiny test checkpoints (`evalkit.testing.tiny_models`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.refmodel.settings import Settings


def kimi_linear_config(
    *,
    vocab_size: int,
    hidden: int,
    intermediate: int,
    layers: int,
    heads: int,
    head_dim: int,
    conv_kernel: int = 4,
    full_attn_layers: Sequence[int] = (),
    **extra: Any,
) -> Any:
    """A Kimi-Linear config: KDA at every layer not in `full_attn_layers` (1-indexed, as in the
    real config's lists), `heads` attention and KDA heads, untied embeddings; `extra` on top."""
    from transformers import KimiLinearConfig

    full = list(full_attn_layers)
    kwargs: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        linear_attn_config={
            "full_attn_layers": full,
            "kda_layers": [i for i in range(1, layers + 1) if i not in full],
            "num_heads": heads,
            "head_dim": head_dim,
            "short_conv_kernel_size": conv_kernel,
        },
        tie_word_embeddings=False,
    )
    kwargs.update(extra)
    return KimiLinearConfig(**kwargs)


def model_config(s: Settings, vocab_size: int) -> Any:
    """The reference model: pure KDA, dense MLPs, no cache in a plain forward (it fails with one)."""
    return kimi_linear_config(
        vocab_size=vocab_size,
        hidden=s.hidden,
        intermediate=s.intermediate,
        layers=s.layers,
        heads=s.heads,
        head_dim=s.head_dim,
        conv_kernel=s.conv_kernel,
        first_k_dense_replace=s.layers,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=False,
    )
