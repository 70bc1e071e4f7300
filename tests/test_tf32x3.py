"""`kernels/tf32x3.py` in Triton's CPU interpreter: the bit-arithmetic rounding to tf32 against an
oracle computed in exact arithmetic from the rounding's definition (nearest, ties away from zero,
10 mantissa bits, fp32's exponent range), and the three-product dot against float64 (a dropped or
doubled product is off by ~1e-4 of the result: the bound is 1e-6). The interpreter computes each
tf32 product in full fp32, so the dot's GPU bits are checked on the device instead
(bench_prefill.py's split sweep: every output and state bit against Triton's own tf32x3).

The module re-runs itself under TRITON_INTERPRET=1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from evalkit.kernels.tf32x3 import dot_tf32x3, tf32_rna
from tests.helpers.interpreter import interpreted_modules, rerun_under_interpreter

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


@triton.jit
def round_kernel(x, y, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(y + r, tf32_rna(tl.load(x + r)))


@triton.jit
def dot_kernel(a, b, c, o, N: tl.constexpr, ACC: tl.constexpr):
    r = tl.arange(0, N)
    ta = tl.load(a + r[:, None] * N + r[None, :])
    tb = tl.load(b + r[:, None] * N + r[None, :])
    if ACC:
        d = dot_tf32x3(ta, tb, tl.load(c + r[:, None] * N + r[None, :]))
    else:
        d = dot_tf32x3(ta, tb, None)
    tl.store(o + r[:, None] * N + r[None, :], d)


@pytest.fixture(scope="module")
def interpreted():
    """Skips outside the interpreter run."""
    interpreted_modules()
    assert type(round_kernel).__name__ == "InterpretedFunction"


def _rna_oracle(x: float) -> float:
    """x rounded to 11 significant bits (tf32), to nearest, ties away from zero, in float64 (exact
    for fp32 inputs); subnormals keep fp32's smallest exponent."""
    if x == 0 or not math.isfinite(x):
        return x
    _, e = math.frexp(abs(x))  # |x| = m 2^e, m in [0.5, 1)
    ulp = 2.0 ** max(e - 11, -136)
    return math.copysign(math.floor(abs(x) / ulp + 0.5) * ulp, x)


def test_tf32_rounding_matches_its_definition(interpreted):
    """Random magnitudes over fp32's range, exact ties (low 13 bits 0x1000) and their neighbours,
    carries into the exponent (mantissa all ones), subnormals, zeros of both signs."""
    g = np.random.default_rng(0)
    rand = (g.standard_normal(2048) * np.exp2(g.integers(-140, 120, 2048))).astype(np.float32)
    bits = g.integers(0, 2**31, 1024, dtype=np.uint32) & np.uint32(0x7FFFE000)
    ties = np.concatenate([bits | 0x1000, bits | 0x0FFF, bits | 0x1001, bits | 0x1FFF]).view(np.float32)
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0**-130, -(2.0**-149), 3.4e38, 1.9999999], np.float32)
    x = np.concatenate([rand, ties, -ties, special])
    x = x[np.isfinite(x)]
    x = x[: 1 << int(math.log2(x.size))]  # a power of two: one program, no mask
    y = torch.empty(x.size)
    round_kernel[(1,)](torch.from_numpy(x), y, N=x.size)
    want = np.array([_rna_oracle(float(v)) for v in x], np.float64)
    got = y.numpy().astype(np.float64)
    assert np.array_equal(got, want), [(float(a), b, c) for a, b, c in zip(x, got, want) if b != c][:5]
    assert np.array_equal(np.signbit(got), np.signbit(x))
    assert (np.diff(np.sort(got[got != 0])) >= 0).all() and len(np.unique(got)) < x.size  # it rounds


@pytest.mark.parametrize("acc", [False, True])
def test_three_product_dot_is_fp32_accurate(interpreted, acc):
    g = torch.Generator().manual_seed(1)
    n = 32
    a, b, c = (torch.randn(n, n, generator=g) for _ in range(3))
    o = torch.empty(n, n)
    dot_kernel[(1,)](a, b, c, o, N=n, ACC=acc)
    want = a.double() @ b.double() + (c.double() if acc else 0)
    err = ((o.double() - want).abs().max() / want.abs().max()).item()
    assert err < 1e-6, err
