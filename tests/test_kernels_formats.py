"""Every state storage format through the real kernels against the float64 reference whose stores
round the same way (`kda_decode.reference.store` with the format, on a float64 pool).

The CPU path runs in this process; the Triton kernels run in Triton's CPU interpreter in a fresh
process (see tests/test_kernels_triton.py), where the `tk` tests execute."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import KernelInputError, cpu, parse_format, reference
from evalkit.kernels.testing import (
    check_stored_like_reference,
    kda_inputs,
    random_cu_seqlens,
    random_pool,
)
from tests.helpers.interpreter import INTERPRETING, interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err

H = 2
# every storage, every rounding, mantissa widths from 1 bit up, a seeded SR
FORMATS = [
    "fp16-sr",
    "fp16-rtz",
    "bf16-sr",
    "bf16-rtz",
    "fp8_e4m3",
    "fp8_e4m3-sr",
    "fp8_e5m2",
    "fp8_e5m2-rtz",
    "m1",
    "m3-rtz",
    "m7",
    "m10-sr:7",
]


test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


@pytest.fixture(scope="module")
def tk():
    return interpreted_modules(
        decode="evalkit.kernels.kda_decode.wrapper", prefill="evalkit.kernels.kda_prefill.wrapper"
    )


def _decode_case(name: str, K: int, V: int):
    fmt = parse_format(name)
    B, S = 3, 6
    x = kda_inputs(B, H, K, V)
    pool = _as_format(random_pool(S, H, K, V, torch.float32), fmt)
    slots = torch.randperm(S)[:B]
    positions = torch.randint(0, 200_000, (B,))
    return fmt, x, pool, slots, positions


def _as_format(pool: torch.Tensor, fmt) -> torch.Tensor:
    """A pool whose contents are already stored in `fmt` (as earlier tokens would have left it)."""
    from evalkit.kernels import round_to_format

    return round_to_format(pool, fmt.name.split("-")[0])


def _check_decode(impl, name: str, K: int = 16, V: int = 32, **kw) -> None:
    fmt, x, pool, slots, positions = _decode_case(name, K, V)
    before = pool.clone()
    pool_ref = pool.double()  # float64 pool: the reference carries its state exactly between stores
    sr = dict(fmt=fmt, sr_seed=3, positions=positions)
    o = impl(*x.args(), pool, slots.to(torch.int32), **sr, **kw)
    o_ref = reference.kda_decode(*x.args(), pool_ref, slots, **sr)
    assert rel_err(o, o_ref) < 1e-5
    untouched = torch.ones(pool.shape[0], dtype=torch.bool)
    untouched[slots] = False
    assert torch.equal(pool[untouched].view(torch.uint8), before[untouched].view(torch.uint8))
    check_stored_like_reference(pool[slots], pool_ref[slots], fmt)


def _check_prefill(impl, name: str, lengths: list[int], K: int = 16, V: int = 32, **kw) -> None:
    fmt = parse_format(name)
    T, N = sum(lengths), len(lengths)
    x = kda_inputs(T, H, K, V)
    pool = _as_format(random_pool(N + 2, H, K, V, torch.float32), fmt)
    slots = torch.randperm(N + 2)[:N]
    init = torch.tensor([i % 2 == 0 for i in range(N)])
    positions = torch.randint(0, 100_000, (N,))
    pool_ref = pool.double()
    sr = dict(fmt=fmt, sr_seed=11, positions=positions)
    args = (slots.to(torch.int32), random_cu_seqlens(lengths), init)
    o = impl(*x.args(), pool, *args, **sr, **kw)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, *args, **sr)
    assert rel_err(o, o_ref) < 1e-4
    check_stored_like_reference(pool[slots], pool_ref[slots], fmt, rel_tol=1e-4)


# ------------------------------------------------------------------------------ CPU path (here)


@pytest.mark.parametrize("name", FORMATS)
def test_cpu_decode_every_format_matches_rounded_reference(name):
    _check_decode(cpu.kda_decode, name)


@pytest.mark.parametrize("name", FORMATS)
def test_cpu_prefill_every_format_matches_rounded_reference(name):
    _check_prefill(cpu.kda_prefill, name, [int(torch.randint(20, 40, ())), 1, 7])


def test_a_wrong_rounding_fails_the_reference_check():
    """The check above is sharp: a truncating store (or other random bits) does not pass as
    round-to-nearest (or as the seeded SR)."""
    with pytest.raises(AssertionError, match="equal the reference"):
        fmt, x, pool, slots, positions = _decode_case("fp8_e4m3", 16, 32)
        pool_ref = pool.double()
        cpu.kda_decode(*x.args(), pool, slots, fmt="fp8_e4m3-rtz")
        reference.kda_decode(*x.args(), pool_ref, slots, fmt=fmt)
        check_stored_like_reference(pool[slots], pool_ref[slots], fmt)
    with pytest.raises(AssertionError, match="equal the reference"):
        fmt, x, pool, slots, positions = _decode_case("m7-sr", 16, 32)
        pool_ref = pool.double()
        cpu.kda_decode(*x.args(), pool, slots, fmt=fmt, sr_seed=1, positions=positions)
        reference.kda_decode(*x.args(), pool_ref, slots, fmt=fmt, sr_seed=2, positions=positions)
        check_stored_like_reference(pool[slots], pool_ref[slots], fmt)


def test_format_and_pool_must_agree():
    x = kda_inputs(1, H, 16, 16)
    pool = torch.zeros(1, H, 16, 16)
    with pytest.raises(KernelInputError, match="stores torch.float16"):
        cpu.kda_decode(*x.args(), pool, torch.tensor([0]), fmt="fp16")
    with pytest.raises(KernelInputError, match="positions"):
        cpu.kda_decode(*x.args(), pool, torch.tensor([0]), fmt="m7-sr")


# ------------------------------------------------------------------------- Triton (interpreter)


@pytest.mark.parametrize("name", FORMATS)
def test_triton_decode_every_format_matches_rounded_reference(tk, name):
    _check_decode(tk.decode.kda_decode, name)


@pytest.mark.parametrize("name", ["fp8_e4m3-sr", "m3-rtz", "fp16-sr"])  # the store is shared with decode
def test_triton_prefill_formats_match_rounded_reference(tk, name):
    _check_prefill(tk.prefill.kda_prefill, name, [int(torch.randint(65, 90, ())), 1])


def test_triton_sr_store_is_batch_invariant(tk):
    """A sequence's SR store depends on its position, not on its slot or its batch neighbours."""
    fmt, x, pool, slots, positions = _decode_case("fp16-sr", 16, 32)
    alone = pool.clone()
    tk.decode.kda_decode(*x.args(), pool, slots, fmt=fmt, sr_seed=5, positions=positions)
    one = x.rows(slice(1, 2))
    tk.decode.kda_decode(*one.args(), alone, slots[1:2], fmt=fmt, sr_seed=5, positions=positions[1:2])
    assert torch.equal(alone[slots[1]].view(torch.int16), pool[slots[1]].view(torch.int16))


# ------------------------------------------------- the Triton store itself, on every bit pattern

ORACLE_FORMATS = FORMATS + ["fp16", "bf16", "fp8_e4m3-rtz", "fp8_e5m2-sr:9", "m22-sr", "m1-rtz", "m10-rtz"]


@pytest.fixture(scope="module")
def store_probe():
    """The kernels' store and load on a flat tensor (`kernels/store_probe.py`): on CUDA when there
    is a GPU (`pytest tests/test_kernels_formats.py -k bit_for_bit` on the H200), else in the
    interpreter."""
    if not (INTERPRETING or torch.cuda.is_available()):
        pytest.skip("runs inside test_module_under_triton_interpreter (or on a GPU)")
    from evalkit.kernels.store_probe import store_and_load

    return store_and_load, ("cuda" if torch.cuda.is_available() and not INTERPRETING else "cpu")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


@pytest.mark.parametrize("name", ORACLE_FORMATS)
def test_triton_store_and_load_are_the_oracle_bit_for_bit(store_probe, name):
    """Random fp32 bit patterns (every exponent, subnormals, inf, NaN) and values near the formats'
    limits: the kernel's stored codes equal `round_to_format`'s, and its load widens them exactly."""
    from evalkit.kernels import round_to_format

    store_and_load, dev = store_probe
    fmt = parse_format(name)
    g = torch.Generator().manual_seed(17)
    patterns = torch.randint(-(2**31), 2**31, (3000,), generator=g, dtype=torch.int64).to(torch.int32)
    edges = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 65504, 65520, 7e4, 448, 464, 500, 57344,
             6e4, 2.0**-14, 2.0**-24, 2.0**-25, 3e-8, 2.0**-6, 2.0**-9, 1e-40, 3.4e38]  # fmt: skip
    x = torch.cat([patterns.view(torch.float32), torch.randn(1000, generator=g), torch.tensor(edges)]).to(dev)
    out, back = store_and_load(x, fmt, sr_seed=4, position=987654)
    want = round_to_format(x.cpu().view(1, 1, 1, -1), fmt, sr_seed=4, positions=torch.tensor(987654)).view(-1)
    got = out.cpu()
    nan = x.cpu().isnan()
    bad = (_bits(got) != _bits(want)) & ~(nan & got.float().isnan())
    assert not bad.any(), f"{int(bad.sum())} stores differ, e.g. x={x.cpu()[bad][:3].tolist()}"
    wb = want.float()
    bad = (_bits(back.cpu()) != _bits(wb)) & ~(wb.isnan() & back.cpu().isnan())
    assert not bad.any(), f"{int(bad.sum())} loads differ"
