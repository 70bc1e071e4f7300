"""The fp32-twin check passes on the real kernels and FAILS on a deliberately wrong (truncating)
build: a check that cannot fail is no check. Triton runs in the CPU interpreter, in a fresh process
(see tests/test_kernels_triton.py for why)."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool
from evalkit.kernels.twin_check import TwinChecker, TwinMismatch
from tests.helpers.interpreter import INTERPRETING, interpreted_modules, rerun_under_interpreter

H, K, V = 2, 16, 32


test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


@pytest.fixture
def interp():
    interpreted_modules()


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


ALL_OPTIONS = (16, 2, 4, True, "stream", True, True, 2)  # a DecodeTile with every build option on


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_check_runs_the_twin_with_the_tile_options(interp, monkeypatch, dtype):
    """With a tile that turns every decode build option on, the checker's fp32 twin runs that same
    tile (the options travel in the config): real kernels pass, a truncating build fails."""
    from evalkit.kernels.kda_decode import wrapper

    seen = []
    real = wrapper.kda_decode

    def spy(*args, config=None, **kw):
        seen.append(config)
        return real(*args, config=config, **kw)

    monkeypatch.setattr(wrapper, "decode_config", lambda fmt, V: wrapper.DecodeTile(*ALL_OPTIONS))
    monkeypatch.setattr(wrapper, "kda_decode", spy)
    checker = TwinChecker(raise_on_mismatch=True)
    _decode_launch(checker, dtype)
    assert checker.passed == 1 and seen == [wrapper.DecodeTile(*ALL_OPTIONS)] * 2
    wrong = TwinChecker(rounding="rtz")
    _decode_launch(wrong, dtype)
    assert wrong.checked == 1 and wrong.passed == 0


# ------------------------------------------------------------------------------ every format

NEW_FORMATS = ["fp8_e4m3", "fp8_e5m2-sr", "m3", "m10-rtz", "fp16-sr:2", "bf16-sr"]


def _format_launches(checker: TwinChecker, name: str, prefill: bool = True) -> None:
    """One decode and (optionally) one prefill launch on a pool stored in format `name`."""
    from evalkit.kernels import parse_format, round_to_format

    fmt = parse_format(name)
    base = name.split("-")[0]
    x = kda_inputs(3, H, K, V)
    pool = round_to_format(random_pool(5, H, K, V, torch.float32), base)
    pos = torch.randint(0, 10**6, (3,))
    checker.kda_decode(
        *x.args(), pool, torch.tensor([4, 1, 2], dtype=torch.int32), fmt=fmt, sr_seed=7, positions=pos
    )
    if prefill:
        lengths = [int(torch.randint(1, 70, ())), int(torch.randint(1, 20, ()))]
        x = kda_inputs(sum(lengths), H, K, V)
        checker.kda_prefill(
            *x.args(), pool, torch.tensor([3, 0], dtype=torch.int32), random_cu_seqlens(lengths),
            torch.tensor([True, False]), fmt=fmt, sr_seed=2, positions=pos[:2],
        )  # fmt: skip


@pytest.mark.parametrize("name", NEW_FORMATS)
def test_twin_passes_on_every_format(interp, name):
    checker = TwinChecker(raise_on_mismatch=True)
    _format_launches(checker, name, prefill=name == "fp8_e5m2-sr")
    assert checker.checked >= 1 and checker.passed == checker.checked


@pytest.mark.parametrize("name", NEW_FORMATS)
def test_twin_fails_on_a_wrong_build_of_every_format(interp, name):
    checker = TwinChecker(rounding="wrong")  # rtz for rtne and sr formats, rtne for rtz ones
    _format_launches(checker, name, prefill=name == "m3")
    assert checker.checked >= 1 and checker.passed == 0


def test_twin_fails_on_other_random_bits(interp, monkeypatch):
    """An SR build whose random bits differ from the oracle's (here: another key) is caught."""
    from evalkit.kernels.kda_decode import wrapper

    real = wrapper.launch_key
    monkeypatch.setattr(wrapper, "launch_key", lambda fmt, seed: real(fmt, seed + 1))
    checker = TwinChecker()
    _format_launches(checker, "fp16-sr", prefill=False)
    assert checker.passed == 0 and "SR(" in checker.stats["decode/fp16-sr"].failures[0]


@pytest.mark.parametrize("name", NEW_FORMATS)
def test_twin_on_the_cpu_path_every_format(name, monkeypatch):
    """Without Triton the checker wraps the CPU path: same comparison, in this process."""
    if INTERPRETING:
        pytest.skip("the CPU path runs outside the interpreter")
    checker = TwinChecker(raise_on_mismatch=True)
    _format_launches(checker, name)
    assert checker.checked == 2 and checker.passed == 2
