"""The engine's activation reserve (`evalkit.engine.memory`): what a kernel choice's scratch adds."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from evalkit.engine.config import EngineConfig  # noqa: E402
from evalkit.engine.memory import activation_reserve  # noqa: E402
from evalkit.kernel_choice import parse_kernels  # noqa: E402
from evalkit.model.nemotron_h.config import NemotronHArch  # noqa: E402


def test_the_split_ssd_prefill_reserves_its_block_states():
    """At NemotronH dims (128 heads, state 64 x 128) a 16,384-token launch of 256 sequences keeps
    one fp32 state per 32-token block and per sequence: (512 + 256) x 128 x 8192 x 4 bytes more."""
    arch = NemotronHArch(mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128)
    base = EngineConfig(max_num_batched_tokens=16384, max_num_seqs=256, decode_width=256, max_model_len=4096)
    split = EngineConfig(**{**vars(base), "kernels": parse_kernels("ssd_prefill=split")})
    assert (
        activation_reserve(arch, split) - activation_reserve(arch, base) == (512 + 256) * 128 * 64 * 128 * 4
    )


def test_a_model_without_mamba2_layers_reserves_nothing_for_it():
    from evalkit.model.config import KimiArch

    base = EngineConfig(max_num_batched_tokens=16384, max_num_seqs=256, decode_width=256, max_model_len=4096)
    split = EngineConfig(**{**vars(base), "kernels": parse_kernels("ssd_prefill=split")})
    assert activation_reserve(KimiArch(), split) == activation_reserve(KimiArch(), base)
