"""The GPU code paths of a GDN model, run on CPU under TRITON_INTERPRET=1: the Triton KDA decode
and chunked prefill with the per-head gate broadcast over K, the Triton conv, the paged attention
decode (the split-KV MLA kernel once per KV head, [v | k] rows) and grouped-GEMM MoE must give the
CPU path's tokens and logits."""

from __future__ import annotations

from gdn_fixtures import tiny_gdn

from tests.helpers.gpu_paths import assert_triton_matches_cpu


def test_triton_path_matches_cpu_path(request):
    assert_triton_matches_cpu(tiny_gdn(request, "qwen3_next"), long_len=40, new_tokens=3)
