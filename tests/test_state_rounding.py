"""The rounding oracle (`evalkit.kernels.rounding`) against independent definitions: torch's own
conversions (rtne), a float64 grid computation (rtne, rtz, every format), and statistics (SR)."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.kernels.formats import parse_format
from evalkit.kernels.rounding import round_to_format

ALL = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "m1", "m3", "m7", "m10"]
# explicit mantissa bits, unbiased exponent of the smallest normal, largest finite value
GRID = {
    "fp16": (10, -14, 65504.0),
    "bf16": (7, -126, None),
    "fp8_e4m3": (3, -6, 448.0),
    "fp8_e5m2": (2, -14, 57344.0),
}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def grid(name: str) -> tuple[int, int, float | None]:
    fmt = parse_format(name)
    return GRID[fmt.storage] if fmt.mantissa_bits is None else (fmt.mantissa_bits, -126, None)


def f64_round(x: torch.Tensor, name: str, mode: str) -> torch.Tensor:
    """Independent float64 form: the nearest (rtne) / lower-magnitude (rtz) multiple of the local
    grid step 2^(max(exponent, emin) - N)."""
    n, emin, _ = grid(name)
    x = x.double()
    e = torch.floor(torch.log2(x.abs().clamp_min(1e-300))).clamp_min(emin)
    ulp = torch.exp2(e - n)
    s = x / ulp
    return (torch.round(s) if mode == "rtne" else torch.trunc(s)) * ulp


def values(n: int, lo: float, hi: float, seed: int) -> torch.Tensor:
    """Random signed fp32 values with log-uniform magnitudes in [2^lo, 2^hi)."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.exp2(torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo)
    sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
    return (mag * sign).float()


def random_patterns(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randint(-(2**31), 2**31, (n,), generator=g, dtype=torch.int64)
        .to(torch.int32)
        .view(torch.float32)
    )


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("fp16", torch.float16),
        ("bf16", torch.bfloat16),
        ("fp8_e4m3", torch.float8_e4m3fn),
        ("fp8_e5m2", torch.float8_e5m2),
    ],
)
def test_rtne_equals_torch_conversion_on_every_bit_pattern_class(name, dtype):
    x = torch.cat([random_patterns(200_000, 1), values(50_000, -30, 20, 2)])
    x = torch.cat(
        [
            x,
            torch.tensor(
                [0.0, -0.0, 65504, 65519.99, 65520, 448, 464, 480, 57344, 61440, 2.0**-24, 2.0**-25]
            ),
        ]
    )
    mx = torch.finfo(dtype).max
    if name.startswith("fp8"):  # saturating fp8 (torch's e5m2 conversion does not saturate)
        x = torch.where(x.isnan(), x, x.clamp(-mx, mx))
    want = x.to(dtype)
    got = round_to_format(x, name)
    assert got.dtype == dtype
    same = (bits(got) == bits(want)) | (x.isnan() & got.float().isnan())
    assert bool(same.all()), f"{int((~same).sum())} differ, e.g. {x[~same][:3].tolist()}"


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("mode", ["rtne", "rtz"])
def test_matches_float64_grid(name, mode):
    n, emin, mx = grid(name)
    hi = math.log2(mx) if mx else 100
    x = values(100_000, emin - n - 3, hi, 3)  # subnormal range of the storage up to its max
    fmt = parse_format(name if mode == "rtne" else f"{name}-{mode}")
    got = round_to_format(x, fmt).double()
    want = f64_round(x, name, mode)
    if mx:
        want = want.clamp(-mx, mx) if fmt.storage != "fp16" else want
        if fmt.storage == "fp16":
            want = torch.where(want.abs() > mx, torch.sign(want) * math.inf, want)
    assert torch.equal(got, want), f"{int((got != want).sum())} differ"


@pytest.mark.parametrize("n", [1, 3, 7, 10])
def test_mantissa_width_keeps_n_bits_and_fp32_exponent(n):
    x = values(50_000, -140, 120, 4)  # far outside fp16/bf16-like ranges
    for mode in ("rtne", "rtz", "sr"):
        name = f"m{n}" if mode == "rtne" else f"m{n}-{mode}"
        y = round_to_format(x[None, None, None], name, positions=torch.tensor(7))[0, 0, 0]
        assert y.dtype == torch.float32
        low = bits(y) & ((1 << (23 - n)) - 1)
        assert int(low.abs().sum()) == 0  # only N explicit mantissa bits survive
        assert torch.isfinite(y).all()  # no range limits


def test_m10_is_fp16_and_m7_is_bf16_on_their_ranges():
    x = torch.cat([values(100_000, -14, 15.99, 5), random_patterns(100_000, 6)])
    normal16 = x.isfinite() & (x.abs() >= 2.0**-14) & (x.abs() < 65504)
    for mode in ("", "-rtz", "-sr"):
        kw = dict(positions=torch.tensor(3), sr_seed=1)
        a = round_to_format(x[normal16][None, None, None], "m10" + mode, **kw)
        b = round_to_format(x[normal16][None, None, None], "fp16" + mode, **kw).float()
        assert torch.equal(a, b), mode
        fin = x[x.isfinite()][None, None, None]
        assert torch.equal(
            bits(round_to_format(fin, "m7" + mode, **kw)),
            bits(round_to_format(fin, "bf16" + mode, **kw).float()),
        ), mode


@pytest.mark.parametrize("name,mx", [("fp8_e4m3", 448.0), ("fp8_e5m2", 57344.0)])
def test_fp8_saturates_and_keeps_nan(name, mx):
    x = torch.tensor([1e6, -1e6, math.inf, -math.inf, mx * 1.06, -mx * 1.2, 1e30, math.nan])
    for mode in ("", "-rtz", "-sr"):
        y = round_to_format(x[None, None, None], name + mode, positions=torch.tensor(0))[0, 0, 0].float()
        assert y[:-1].tolist() == [mx, -mx, mx, -mx, mx, -mx, mx], mode
        assert math.isnan(y[-1])


def test_fp16_overflow_is_ieee():
    x = torch.tensor([65504.0, 65519.0, 65520.0, 1e6, -1e6, math.inf])
    assert round_to_format(x, "fp16").float().tolist() == [
        65504,
        65504,
        math.inf,
        math.inf,
        -math.inf,
        math.inf,
    ]
    assert round_to_format(x, "fp16-rtz").float().tolist() == [65504, 65504, 65504, 65504, -65504, math.inf]


def _sr(x: torch.Tensor, name: str, rounds: int, seed_pos: int = 0, sr_seed: int = 0) -> torch.Tensor:
    """`rounds` stochastic roundings of the values x (one per sequence position) -> float64 [rounds, n]."""
    pos = torch.arange(seed_pos, seed_pos + rounds)
    xs = x[None, None, None, :].expand(rounds, 1, 1, -1)
    return round_to_format(xs, name, positions=pos, sr_seed=sr_seed)[:, 0, 0].double()


@pytest.mark.parametrize("name", ["fp16-sr", "bf16-sr", "fp8_e4m3-sr", "fp8_e5m2-sr", "m3-sr", "m10-sr:5"])
def test_sr_is_unbiased_and_rtz_is_not(name):
    """Mean rounding error ~ 0. Each SR result is lo or hi (the neighbours of x on the grid); with
    f = (x - lo) / (hi - lo) the normalised error (y - x) / (hi - lo) has mean 0 and variance
    f (1 - f), so the mean over all roundings is within 5 standard errors of 0 (false alarm
    < 1e-6); truncation of the same values must be far outside that."""
    base = name.split("-")[0]
    n, emin, mx = grid(base)
    hi_exp = math.log2(mx) - 1 if mx else 30
    x = values(256, emin - n - 2, hi_exp, 8)  # subnormal range included
    y = _sr(x, name, 2000)
    lo = round_to_format(x, f"{base}-rtz").double()
    step = f64_round(x, base, "rtz") - lo  # 0: same grid point; assert below
    assert torch.equal(step, torch.zeros_like(step))
    up = torch.where(x >= 0, 1.0, -1.0).double() * torch.exp2(
        torch.floor(torch.log2(lo.abs().clamp_min(1e-300))).clamp_min(emin) - n
    )
    up = torch.where(lo == 0, torch.where(x >= 0, 1.0, -1.0).double() * 2.0 ** (emin - n), up)
    hi = lo + up
    assert bool(((y == lo) | (y == hi)).all()), "a stochastic rounding left the two neighbours"
    f = (x.double() - lo) / (hi - lo)
    err = (y - x.double()) / (hi - lo)
    sd = math.sqrt(float((f * (1 - f)).sum()) * y.shape[0]) / err.numel()
    z = float(err.mean()) / sd
    assert abs(z) < 5, f"mean error {float(err.mean()):.2e} is {z:.1f} standard errors from 0"
    # per element, the frequency of rounding up is f (a loose per-element bound, many elements)
    assert float(((y == hi).double().mean(0) - f).abs().max()) < 0.06
    z_rtz = float(((lo - x.double()) / (hi - lo)).mean()) / sd
    assert abs(z_rtz) > 50, "truncation should be biased far beyond the noise"


def test_sr_is_reproducible_seeded_and_batch_invariant():
    g = torch.Generator().manual_seed(9)
    s = torch.randn(4, 2, 8, 16, generator=g)
    pos = torch.tensor([5, 9, 5, 1000])
    a = round_to_format(s, "fp16-sr", positions=pos, sr_seed=3)
    assert torch.equal(bits(a), bits(round_to_format(s, "fp16-sr", positions=pos, sr_seed=3)))
    # batch invariance: a state's rounding depends on its own position only, not on its row
    one = round_to_format(s[3:4], "fp16-sr", positions=pos[3:4], sr_seed=3)
    assert torch.equal(bits(one[0]), bits(a[3]))
    # other seeds, layers (sr_seed) and positions draw other bits
    for other in (
        round_to_format(s, "fp16-sr:1", positions=pos, sr_seed=3),
        round_to_format(s, "fp16-sr", positions=pos, sr_seed=4),
        round_to_format(s, "fp16-sr", positions=pos + 1, sr_seed=3),
    ):
        assert not torch.equal(bits(other), bits(a))
    with pytest.raises(ValueError, match="positions"):
        round_to_format(s, "fp16-sr")


@pytest.mark.parametrize("name", ["fp16", "bf16-rtz", "fp8_e4m3", "m3", "fp16-sr", "m5-sr"])
def test_large_states_round_in_slices_to_the_same_codes(monkeypatch, name):
    """Above ROUND_CHUNK_ELEMENTS a state is rounded a slice of leading rows at a time (bounded
    memory); each slice keeps its rows' positions, so the codes are those of one pass."""
    from evalkit.kernels import rounding

    x = torch.randn(7, 3, 4, 8) * 3.0
    x[2, 1, 0, :3] = torch.tensor([float("nan"), float("inf"), 1e-30])
    pos = torch.arange(7) * 1013 + 11
    whole = round_to_format(x, name, sr_seed=3, positions=pos)
    seen = []
    real = rounding._round_codes
    monkeypatch.setattr(rounding, "_round_codes", lambda x, *a: seen.append(x.shape[0]) or real(x, *a))
    monkeypatch.setattr(rounding, "ROUND_CHUNK_ELEMENTS", 2 * 3 * 4 * 8)  # two rows a slice
    sliced = round_to_format(x, name, sr_seed=3, positions=pos)
    assert seen == [2, 2, 2, 1]
    assert torch.equal(whole.view(torch.uint8), sliced.view(torch.uint8))
