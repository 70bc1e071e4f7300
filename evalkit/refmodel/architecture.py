"""Which recurrence the reference model uses: `kda` (transformers' `KimiLinearForCausalLM`, pure
KDA, per-channel decay), `gdn` (transformers' `Qwen3_5ForCausalLM` with every layer Gated
DeltaNet, one decay per head) or `mamba2` (transformers' `NemotronHForCausalLM` with every mixer
Mamba2, one decay per head and no delta rule). Same sizes, tokenizer, data and loss, so the
models can be compared on the same questions for how their state's precision matters."""

from __future__ import annotations

from typing import Any

from evalkit.refmodel.kimi_config import model_config as kda_config
from evalkit.refmodel.settings import Settings

ARCHES = ("kda", "gdn", "mamba2")
MAX_CONTEXT = 131072  # the Mamba2 model's declared context: the longest cell evalkit's studies run
MODEL_TYPES = {"kda": "kimi_linear", "gdn": "qwen3_5_text", "mamba2": "nemotron_h"}
DESCRIPTIONS = {
    "kda": "pure-KDA Kimi-Linear (per-channel decay gate)",
    "gdn": "pure Gated DeltaNet Qwen3.5 (one scalar decay per head)",
    "mamba2": "pure-Mamba2 NemotronH (one scalar decay per head, Mamba2 + relu2 MLP blocks)",
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


def mamba2_config(s: Settings, vocab_size: int) -> Any:
    """A NemotronH config whose blocks alternate Mamba2 and relu2 MLP (`layers` of each, as the
    other models have a mixer and an MLP per layer): `heads` Mamba heads of `head_dim` channels,
    state `head_dim` wide (KDA's [head_dim, head_dim] per head), one B/C group per head (as each
    KDA/GDN head has its own key and query), no dt clamp (transformers clamps prefill only).
    `max_position_embeddings` is what engines (vLLM, evalkit) take as the context limit; without
    attention nothing in the model depends on position, so it is set to MAX_CONTEXT, not the
    class default of 4096 (which refused the 8k-32k retrieval cells the other families run)."""
    from transformers import NemotronHConfig

    cfg = NemotronHConfig(
        vocab_size=vocab_size,
        hidden_size=s.hidden,
        layers_block_type=["linear_attention", "mlp"] * s.layers,
        intermediate_size=s.intermediate,
        mamba_num_heads=s.heads,
        mamba_head_dim=s.head_dim,
        ssm_state_size=s.head_dim,
        n_groups=s.heads,
        conv_kernel=s.conv_kernel,
        chunk_size=128,
        num_attention_heads=s.heads,
        num_key_value_heads=s.heads,
        head_dim=s.head_dim,
        time_step_limit=(0.0, float("inf")),
        max_position_embeddings=MAX_CONTEXT,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=False,
    )
    return cfg


def model_config(s: Settings, vocab_size: int) -> Any:
    """The transformers config of the reference model of architecture `s.arch`."""
    if s.arch == "kda":
        return kda_config(s, vocab_size)
    if s.arch == "gdn":
        return gdn_config(s, vocab_size)
    if s.arch == "mamba2":
        return mamba2_config(s, vocab_size)
    raise ValueError(f"arch must be one of {ARCHES}, got {s.arch!r}")


def build_model(s: Settings, vocab_size: int) -> Any:
    """transformers' own causal LM of `s.arch` with fresh weights (what training updates); a
    Mamba2 model's mixers scan through FLA's kernel on a GPU (`mamba2_ssd`), else in torch."""
    from transformers import KimiLinearForCausalLM, NemotronHForCausalLM, Qwen3_5ForCausalLM

    if s.arch == "gdn":
        from evalkit.refmodel.gdn_on_kda import route_gdn_through_kda

        route_gdn_through_kda()
    if s.arch == "mamba2":
        return build_mamba2(s, vocab_size, NemotronHForCausalLM)
    cls = KimiLinearForCausalLM if s.arch == "kda" else Qwen3_5ForCausalLM
    return cls(model_config(s, vocab_size))


def build_mamba2(s: Settings, vocab_size: int, cls: Any) -> Any:
    """The Mamba2 reference model with its training mixers (`mamba2_mixer`). transformers 5.17
    clamps prefill dt at `time_step_min` (an init setting): set to 0 after init, so every version
    reads the checkpoint as the engine does (no clamp)."""
    from evalkit.refmodel.mamba2_mixer import use_route
    from evalkit.refmodel.mamba2_ssd import TORCH_NOTE, kernel_route, ssd_torch

    model = cls(mamba2_config(s, vocab_size))
    model.config.time_step_min = 0.0
    for m in model.modules():
        if hasattr(m, "time_step_limit"):
            m.time_step_limit = (0.0, float("inf"))
    route = kernel_route() if s.device != "cpu" else None
    use_route(model, *(route or (ssd_torch, TORCH_NOTE)))
    return model
