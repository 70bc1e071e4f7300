"""The kernel-profile table behind bench_engine's `profile` part: categories from real kernel
symbols, per-run figures, and shares that add up."""

from __future__ import annotations

import pytest

from evalkit.bench.kernel_profile import KernelTable, categorize, from_report, markdown

NAMES = {
    "void cutlass::device_kernel<enable_3x_kernel_for_sm90<grouped_gemm>>": "moe grouped gemm",
    "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversalINS5_"
    "17GroupProblemShapeIN4cute5tupleIJiiiEEEEENS5_10collec": "moe grouped gemm",
    "intra_kernel": "kda prefill",
    "solve_wy_kernel": "kda prefill",
    "gate_cumsum_kernel": "kda prefill",
    "scan_kernel": "kda prefill",  # the stream variant's, not a sort's scan
    "diag_kernel": "kda prefill",
    "wu_kernel": "kda prefill",
    "conv_prefill_kernel": "short conv",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8": "gemm",
    "kda_decode_kernel": "kda decode",
    "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<192>>": "mla attention",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT": "gemm",
    "void at::native::vectorized_elementwise_kernel<4, at::native::silu>": "elementwise/copy",
    "void at::native::(anonymous namespace)::radixSortKVInPlace<>": "sort/topk/scatter",
    "rms_norm_kernel": "norm",
    "swiglu_kernel": "elementwise/copy",
    "moe_combine_kernel": "elementwise/copy",
    "moe_gemm_kernel": "moe grouped gemm",
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


def test_old_report_recategorized_exactly_when_moved_kernels_are_listed():
    old_rules = (("gemm", r"nvjet"),)
    rows = [("intra_kernel", 2, 6.0), ("nvjet_a", 2, 4.0), ("nvjet_b", 2, 1.0), ("mystery", 2, 1.0)]
    t = KernelTable(rows, n_runs=2)
    # a report written under old rules, listing only the top 2 kernels
    d = t.to_dict(n=2)
    del d["kernels"]
    acc: dict[str, float] = {}
    for name, _, ms in rows:
        acc[categorize(name, old_rules)] = acc.get(categorize(name, old_rules), 0.0) + ms / 2
    d["categories"] = [{"category": c, "ms_per_run": ms, "share": 0} for c, ms in acc.items()]
    for r in d["top_kernels"]:
        r["category"] = categorize(r["kernel"], old_rules)
    back = from_report(d)
    got = {c: ms for c, ms, _ in back.by_category()}
    assert got == pytest.approx({c: ms for c, ms, _ in t.by_category()})
    assert got["kda prefill"] == pytest.approx(3.0)  # moved out of "other" by today's rules
    assert from_report(t.to_dict()).rows == [(n, c, pytest.approx(ms)) for n, c, ms in rows]
