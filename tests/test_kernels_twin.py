"""The fp32-twin check passes on the real kernels and FAILS on a deliberately wrong (truncating)
build: a check that cannot fail is no check. Triton runs in the CPU interpreter, in a fresh process
(see tests/test_kernels_triton.py for why)."""

from __future__ import annotations

import importlib
import os

import pytest
import torch

from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool, run_module_under_interpreter
from evalkit.kernels.twin_check import TwinChecker, TwinMismatch

H, K, V = 2, 16, 32


INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.skipif(INTERPRETING, reason="this process is the interpreter run")
def test_module_under_triton_interpreter():
    rc, out = run_module_under_interpreter(__file__)
    assert rc == 0, out


@pytest.fixture
def interp():
    if not INTERPRETING:
        pytest.skip("runs inside test_module_under_triton_interpreter")
    w = importlib.import_module("evalkit.kernels.kda_decode.wrapper")
    assert type(w.kda_decode_kernel).__name__ == "InterpretedFunction"


def _decode_launch(checker: TwinChecker, dtype):
    x = kda_inputs(3, H, K, V)
    pool = random_pool(5, H, K, V, dtype)
    slots = torch.tensor([4, 1, 2], dtype=torch.int32)
    checker.kda_decode(*x.args(), pool, slots)
    return pool


def _prefill_launch(checker: TwinChecker, dtype):
    lengths = [int(torch.randint(1, 70, ())), int(torch.randint(1, 20, ()))]
    x = kda_inputs(sum(lengths), H, K, V)
    pool = random_pool(4, H, K, V, dtype)
    checker.kda_prefill(
        *x.args(),
        pool,
        torch.tensor([3, 0], dtype=torch.int32),
        random_cu_seqlens(lengths),
        torch.tensor([True, False]),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_passes_on_real_kernels(interp, dtype):
    checker = TwinChecker(raise_on_mismatch=True)
    _decode_launch(checker, dtype)
    _decode_launch(checker, dtype)
    _prefill_launch(checker, dtype)
    assert checker.checked == 3 and checker.passed == 3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_fails_on_truncating_kernel(interp, dtype):
    checker = TwinChecker(rounding="rtz")
    _decode_launch(checker, dtype)
    _prefill_launch(checker, dtype)
    assert checker.checked == 2 and checker.passed == 0
    assert all("RTNE" in f for s in checker.stats.values() for f in s.failures)
    with pytest.raises(TwinMismatch):
        _decode_launch(TwinChecker(rounding="rtz", raise_on_mismatch=True), dtype)


def test_twin_skips_fp32_pools_and_samples(interp):
    checker = TwinChecker(every=2)
    _decode_launch(checker, torch.float32)
    assert checker.checked == 0
    for _ in range(4):
        _decode_launch(checker, torch.float16)
    assert checker.checked == 2 and checker.passed == 2


def test_twin_detects_an_output_difference(interp, monkeypatch):
    """A kernel whose outputs move (not just its stored state) is caught by the output comparison."""
    from evalkit.kernels.kda_decode import wrapper

    real = wrapper.kda_decode

    def skewed(*args, **kw):
        o = real(*args, **kw)
        pool = args[7]
        return o if pool.dtype == torch.float32 else torch.nextafter(o, torch.full_like(o, float("inf")))

    monkeypatch.setattr(wrapper, "kda_decode", skewed)
    checker = TwinChecker()
    _decode_launch(checker, torch.float16)
    assert checker.passed == 0 and "outputs differ" in checker.stats["decode/fp16"].failures[0]
