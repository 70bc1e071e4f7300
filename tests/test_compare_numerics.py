# ruff: noqa: E501
"""`evalkit.compare.numerics`: what two local runs computed differently besides the state."""

from __future__ import annotations

from evalkit.compare.numerics import numerics_differences
from evalkit.kernel_choice import KernelChoice


def _local(**over):
    m = {
        "backend": {"engine": "evalkit-local", "device": "cpu", "model_dtype": "float32",
                    "batch_invariance": {"prefill_rows": 2048, "decode_width": 8}},
        "kernels": {**KernelChoice().describe(), "weights_dtype": "float32"},
        "source_hash": "a" * 64,
        "libraries": {"torch": "2.13.0", "openai": "1.0"},
        "arm": {"label": "fp32"},
    }  # fmt: skip
    for dotted, value in over.items():
        cur = m
        *head, last = dotted.split("__")
        for part in head:
            cur = cur[part]
        cur[last] = value
    return m


def test_equal_numerics_and_other_arms_are_no_difference():
    assert numerics_differences(_local(), _local()) == []
    assert numerics_differences(_local(), _local(arm={"label": "fp16@chunk=64"})) == []  # the state
    assert numerics_differences(_local(), _local(libraries__openai="2.0")) == []  # no numerics


def test_each_field_besides_the_state_is_named():
    cases = {
        "backend__device": ("NVIDIA H200", "backend.device: cpu vs NVIDIA H200"),
        "backend__batch_invariance__prefill_rows": (16384, "backend.batch_invariance.prefill_rows: 2048 vs 16384"),
        "source_hash": ("b" * 64, "source_hash: aaaaaaaaaaaa vs bbbbbbbbbbbb"),
        "libraries__torch": ("2.14.0", "libraries.torch: 2.13.0 vs 2.14.0"),
        "kernels": (KernelChoice(prefill_dots="bf16").describe(), "kernels.prefill_dots: fp32 vs bf16"),
    }  # fmt: skip
    for field, (value, want) in cases.items():
        assert numerics_differences(_local(), _local(**{field: value})) == [want], field


def test_runs_before_the_record_and_servers_are_not_refused():
    old = _local()
    del old["kernels"], old["source_hash"]
    then = KernelChoice(moe_decode="grouped_mm")  # the defaults then: moe_decode was not yet a switch
    assert numerics_differences(old, _local(kernels=then.describe())) == []
    assert numerics_differences(old, _local()) == ["kernels.moe_decode: grouped_mm vs triton"]
    assert numerics_differences(
        old, _local(kernels=KernelChoice(moe_combine="torch", moe_decode="grouped_mm").describe())
    ) == ["kernels.moe_combine: fused vs torch"]
    server = {"backend": {"name": "openai"}, "arm": {"label": "vllm-bf16"}}
    assert numerics_differences(server, _local()) == []
