"""The kernel-profile table behind bench_engine's `profile` part: categories from real kernel
symbols, per-run figures, and shares that add up."""

from __future__ import annotations

import pytest

from evalkit.bench.kernel_profile import KernelTable, categorize, markdown

NAMES = {
    "void cutlass::device_kernel<enable_3x_kernel_for_sm90<grouped_gemm>>": "moe grouped gemm",
    "kda_prefill_intra_kernel": "kda prefill",
    "kda_decode_kernel": "kda decode",
    "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<192>>": "mla attention",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT": "gemm",
    "void at::native::vectorized_elementwise_kernel<4, at::native::silu>": "elementwise/copy",
    "void at::native::(anonymous namespace)::radixSortKVInPlace<>": "sort/topk/scatter",
    "some_unknown_symbol": "other",
}


@pytest.mark.parametrize("name,cat", NAMES.items())
def test_categories_from_kernel_symbols(name, cat):
    assert categorize(name) == cat


def test_table_is_per_run_and_shares_sum_to_one():
    t = KernelTable([("kda_decode_kernel", 4, 8.0), ("nvjet_x", 8, 24.0), ("mystery", 2, 8.0)], n_runs=2)
    d = t.to_dict()
    assert d["gpu_ms_per_run"] == pytest.approx(20.0)
    cats = {c["category"]: c for c in d["categories"]}
    assert cats["gemm"]["ms_per_run"] == pytest.approx(12.0)
    assert sum(c["share"] for c in d["categories"]) == pytest.approx(1.0)
    assert d["categories"][0]["category"] == "gemm"  # largest first
    top = d["top_kernels"][0]
    assert (top["kernel"], top["calls_per_run"], top["share"]) == ("nvjet_x", 4.0, 0.6)
    md = "\n".join(markdown(d, "x"))
    assert "| gemm | 12.00 | 60.0% |" in md and "`mystery`" in md
