"""The Mamba2 SSD kernels compiled for sm_90 on this CPU machine (Triton ships ptxas): every
format's build sums in the fp32 build's order (what makes the fp32-twin check bit-exact on the
GPU), and neither the decode step nor the prefill (at NemotronH's dims, its wrapper's tile)
spills. Slow: each build is a full compile."""

from __future__ import annotations

import os

import pytest

if os.environ.get("TRITON_INTERPRET") == "1":  # kernels would be built for the interpreter
    pytest.skip("compiles for the GPU; not under TRITON_INTERPRET=1", allow_module_level=True)
from evalkit.kernels import compile_check  # noqa: E402 - after the module-level skip

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_decode_builds_sum_in_the_fp32_order_without_spills():
    twin = compile_check.summation_signature(compile_check.ssd_decode_build("fp32").ttgir)
    assert twin  # the readout's reduction over N is there
    for state in ("fp16", "bf16", "bf16-sr", "fp8_e4m3-sr", "m5-rtz"):
        build = compile_check.ssd_decode_build(state)
        assert compile_check.summation_signature(build.ttgir) == twin, state
        assert build.resources()["stack"] == 0, state


@pytest.mark.parametrize("state", ["fp32", "bf16", "fp16-sr"])
def test_drift_recurrent_kernel_sums_as_the_decode_step_does(state):
    """Drift's one-launch decode mode must compute what the decode step computes per token: its
    readout reduces with the decode kernel's layout (the GPU run checks bit-identity at run time);
    a build on another row block does not, so the comparison can fail."""
    decode = compile_check.summation_signature(compile_check.ssd_decode_build(state).ttgir)
    recurrent = compile_check.ssd_recurrent_build(state)
    assert decode and compile_check.summation_signature(recurrent.ttgir) == decode
    assert recurrent.resources()["stack"] == 0
    other = compile_check.ssd_recurrent_build(state, BP=32)
    assert compile_check.summation_signature(other.ttgir) != decode


def test_prefill_builds_sum_in_the_fp32_order_without_spills():
    fp32 = compile_check.ssd_prefill_build("fp32")
    twin = compile_check.summation_signature(fp32.ttgir)
    assert any("dot" in s for s in twin)
    assert fp32.resources()["stack"] == 0
    for state, intra in (("bf16-sr", ""), ("fp8_e4m3", ""), ("fp16", "bf16")):
        build = compile_check.ssd_prefill_build(state, intra=intra)
        assert compile_check.summation_signature(build.ttgir) == twin, state
        assert build.resources()["stack"] == 0, state


def test_the_untiled_prefill_spills():
    """The check above can fail: the whole N axis in one block, 64-token blocks, 4 warps spills."""
    from evalkit.kernels.ssd_prefill.wrapper import Tile

    untiled = Tile(bt=64, bp=32, bn=128, num_warps=4, num_stages=3)
    assert compile_check.ssd_prefill_build("fp32", tile=untiled).resources()["stack"] > 0


def test_split_prefill_builds_carry_the_walk_kernels_dots_without_spills():
    """The split build's two kernels hold no spills and between them run exactly the walk
    kernel's dots (shapes, operand layouts, MMA instruction shapes): on the GPU the two builds
    then sum every product in the same order, which is what makes them agree to the last bit."""
    from collections import Counter

    def dots(*builds):
        return Counter(s for b in builds for s in compile_check.summation_signature(b.ttgir) if "dot" in s)

    for state, intra in (("fp32", ""), ("bf16-sr", "bf16")):
        state_pass, output = compile_check.ssd_split_builds(state, intra=intra)
        assert state_pass.resources()["stack"] == 0 and output.resources()["stack"] == 0, state
        assert dots(state_pass, output) == dots(compile_check.ssd_prefill_build(state, intra=intra)), state
