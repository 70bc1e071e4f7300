"""Compile the Triton kernels for sm_90 (H100/H200) on this CPU machine (Triton ships ptxas):
GPU-only compile errors, register spills, and the property that makes the fp32-twin check exact:
16-bit builds sum in the same order as the fp32 build."""

from __future__ import annotations

import os

import pytest

if os.environ.get("TRITON_INTERPRET") == "1":  # kernels would be built for the interpreter
    pytest.skip("compiles for the GPU; not under TRITON_INTERPRET=1", allow_module_level=True)
from evalkit.kernels import compile_check  # noqa: E402 - after the module-level skip


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_every_kernel_compiles_for_sm90_without_spills():
    from evalkit.kernels.kda_decode.wrapper import DECODE_TILES

    builds = [compile_check.decode_build(s, BV=DECODE_TILES[s][0], num_warps=DECODE_TILES[s][1])
              for s in ("fp32", "fp16", "bf16")]  # fmt: skip
    builds += compile_check.prefill_builds() + compile_check.other_builds()
    builds += [compile_check.mla_prefill_build(m) for m in ("bf16", "fp16", "fp32")]
    for b in builds:
        r = b.resources()
        assert r["registers"] is not None, b.name
        assert r["stack"] == 0, f"{b.name} spills {r['stack']} bytes per thread"
        assert b.shared <= 227 * 1024, f"{b.name} needs {b.shared} bytes of shared memory"


@pytest.mark.parametrize("state", ["fp16", "bf16"])
def test_16bit_builds_sum_in_the_fp32_order(state):
    from evalkit.kernels.kda_decode.wrapper import DECODE_TILES

    bv, nw = DECODE_TILES[state]
    twin = compile_check.decode_build("fp32", model="fp32", BV=bv, num_warps=nw)
    build = compile_check.decode_build(state, model="fp32", BV=bv, num_warps=nw)
    sig = compile_check.summation_signature(twin.ttgir)
    assert len(sig) == 4  # l2norm(q), l2norm(k), k.S, q.S
    assert compile_check.summation_signature(build.ttgir) == sig
    pf_twin = compile_check.prefill_builds("fp32", model="fp32")[3]
    pf = compile_check.prefill_builds(state, model="fp32")[3]
    assert compile_check.summation_signature(pf.ttgir) == compile_check.summation_signature(pf_twin.ttgir)


def test_signature_check_sees_a_dtype_dependent_layout():
    """Without the VEC contiguity cap the fp16 build lays out (and sums) the state differently:
    the comparison above is able to fail."""
    twin = compile_check.decode_build("fp32", model="fp32", BV=64, VEC=64)
    build = compile_check.decode_build("fp16", model="fp32", BV=64, VEC=64)
    assert compile_check.summation_signature(build.ttgir) != compile_check.summation_signature(twin.ttgir)


def test_fp32_build_contains_no_16bit_code():
    b = compile_check.decode_build("fp32", model="fp32", BV=32)
    assert "f16" not in b.ttgir and "truncf" not in b.ttgir
    sp = compile_check.prefill_builds("fp32", model="fp32")[3]
    assert "f16" not in sp.ttgir and "truncf" not in sp.ttgir


@pytest.mark.parametrize("state", ["fp8_e4m3-sr", "fp8_e5m2", "m3-rtz", "fp16-sr", "bf16-sr:3"])
def test_every_format_builds_for_sm90_without_spills_and_sums_in_the_fp32_order(state):
    """The storage formats (fp8 codes, mN, truncation, stochastic rounding) change only the
    load and the store: the builds compile for the GPU without spills, and add in the fp32 build's
    order, so the fp32-twin check can demand bit-identical outputs on the H200."""
    from evalkit.kernels.formats import parse_format
    from evalkit.kernels.kda_decode.wrapper import decode_config

    tile = decode_config(parse_format(state), 128)
    twin = compile_check.decode_tile_build("fp32", tile, model="fp32")
    build = compile_check.decode_tile_build(state, tile, model="fp32")
    assert compile_check.summation_signature(build.ttgir) == compile_check.summation_signature(twin.ttgir)
    builds = [build, compile_check.decode_tile_build(state, tile)]
    if state in ("fp8_e4m3-sr", "m3-rtz", "fp16-sr"):
        sp = compile_check.state_pass_build(state)
        assert compile_check.summation_signature(sp.ttgir) == compile_check.summation_signature(
            compile_check.state_pass_build("fp32").ttgir
        )
        builds.append(sp)
    for b in builds:
        r = b.resources()
        assert r["registers"] is not None and r["stack"] == 0, f"{state}: {b.name} {r}"


def test_mla_prefill_fp32_build_splits_its_dots_for_tf32x3():
    """fp32 inputs take tf32x3 (each operand split into a tf32 part and its remainder, three
    tensor-core products): the build holds the split; the 16-bit build multiplies as it is."""
    fp32 = compile_check.mla_prefill_build("fp32")
    assert "cvt.rna.tf32.f32" in fp32.ttgir and "bf16" not in fp32.ttgir
    plain = compile_check.mla_prefill_build("fp32", prec="tf32")
    assert "cvt.rna.tf32.f32" not in plain.ttgir
    bf16 = compile_check.mla_prefill_build("bf16")
    assert "cvt.rna.tf32.f32" not in bf16.ttgir and "warp_group_dot" in bf16.ttgir
