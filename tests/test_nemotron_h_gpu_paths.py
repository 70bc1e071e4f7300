"""The GPU code paths of a NemotronH model, run on CPU under TRITON_INTERPRET=1: the Triton SSD
prefill (chunked) and decode, the Triton conv with its bias, the paged attention decode ([v | k]
rows, no RoPE) must give the CPU path's tokens and logits."""

from __future__ import annotations

import pytest
from helpers.checkpoint_cache import checkpoint_cache_root

from tests.helpers.gpu_paths import assert_triton_matches_cpu


@pytest.mark.slow  # two engine runs, one of them interpreted (~20 s on a loaded 2-core machine)
def test_triton_path_matches_cpu_path(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    assert_triton_matches_cpu(ckpt, long_len=40, new_tokens=3)


@pytest.mark.slow  # two interpreted engine runs
def test_split_ssd_prefill_gives_the_walk_kernels_bits(request):
    """`--kernels ssd_prefill=split` through the whole engine (chunked prefill, then decode steps
    from the states it stored): the same tokens and the same logits to the last bit as the default."""
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint
    from tests.helpers.gpu_paths import run_engine

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    walk = run_engine(ckpt, "triton", 40, 3)
    split = run_engine(ckpt, "triton", 40, 3, "ssd_prefill=split")
    assert split["tokens"] == walk["tokens"] and split["logits"] == walk["logits"]
