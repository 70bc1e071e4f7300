"""The Mamba2 SSD ops (kernels/ssd_decode, kernels/ssd_prefill): the float64 reference equals an
independent float64 recurrence written from mamba2.md §3 (per-head scalar decay, head h reads
group h // (H/G), readout from the updated state, D skip); the float32 CPU path (chunked) and the
Triton kernels (in Triton's CPU interpreter: this module re-runs itself with TRITON_INTERPRET=1)
equal the float64 reference, outputs and every stored format; the fp32-twin check passes on the
real kernels and fails on deliberately wrong builds."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from evalkit.kernels import KernelInputError, cpu, reference, round_to_format
from evalkit.kernels.testing import check_stored_like_reference, random_cu_seqlens, ssd_inputs
from evalkit.kernels.twin_check import TwinChecker, TwinMismatch
from tests.helpers.interpreter import INTERPRETING, interpreted_modules, rerun_under_interpreter

H, P, G, N = 4, 8, 2, 16
FORMATS = ("fp32", "fp16", "bf16-rtz", "fp8_e4m3-sr", "fp8_e5m2", "m5", "bf16-sr:3")
TRITON_FORMATS = ("fp32", "bf16-rtz", "fp8_e4m3-sr", "m5")  # the interpreter is slow: one per rounding
cpu_only = pytest.mark.skipif(INTERPRETING, reason="runs in the plain process")

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


def mamba2_float64(x, dt_raw, B, C, A_log, dt_bias, D, S0):
    """Independent float64 Mamba2 recurrence over one sequence: x [T, H, P], S0 [H, P, N]."""
    x, dt_raw, B, C = (t.double() for t in (x, dt_raw, B, C))
    dt = F.softplus(dt_raw + dt_bias.double())
    A = -A_log.double().exp()
    S = S0.double().clone()
    ys = []
    for t in range(x.shape[0]):
        for h in range(H):
            g = h // (H // G)
            S[h] = torch.exp(dt[t, h] * A[h]) * S[h] + dt[t, h] * x[t, h][:, None] * B[t, g][None, :]
        Cg = C[t].repeat_interleave(H // G, 0)
        ys.append(torch.einsum("hpn,hn->hp", S, Cg) + D.double()[:, None] * x[t])
    return torch.stack(ys), S


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@cpu_only
def test_reference_is_the_mamba2_recurrence():
    gen = _gen()
    lengths = [13, 1, 9]
    args = ssd_inputs(sum(lengths), H, P, G, N, generator=gen)
    pool = torch.randn(4, H, P, N, generator=gen, dtype=torch.float64)
    S0 = pool[1].clone()
    slots, init = torch.tensor([1, 3, 0]), torch.tensor([True, False, False])
    y = reference.ssd_prefill(*args, pool, slots, random_cu_seqlens(lengths), init)
    want_y, want_S = mamba2_float64(*(a[:13] for a in args[:4]), *args[4:], S0)
    torch.testing.assert_close(y[:13], want_y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pool[1], want_S, rtol=1e-12, atol=1e-12)
    # a decode step continues the same recurrence
    step = ssd_inputs(1, H, P, G, N, generator=gen)
    yd = reference.ssd_decode(*step, pool, torch.tensor([1]))
    want_y, want_S2 = mamba2_float64(*step[:4], *step[4:], want_S)
    torch.testing.assert_close(yd, want_y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pool[1], want_S2, rtol=1e-12, atol=1e-12)


def _prefill_case(impl, fmt, gen, *, lengths=(37, 5, 20), chunk_size=16, dtype=torch.float32, intra=None):
    """One packed prefill then two decode steps on `impl` (a module of ops) and on the float64
    reference from the same starting pool; returns the prefill's output error relative to max |y|,
    the decode steps' (which read stored states: a stored element that fp32 error moved across a
    rounding threshold moves them by up to a grid step), and the stored pools (impl's, the
    reference's float64 copy stored through the same format)."""
    from evalkit.kernels import parse_format

    fmt = parse_format(fmt)
    lengths = list(lengths)
    n = len(lengths)
    start = round_to_format(torch.randn(n + 2, H, P, N, generator=gen) * 0.5, fmt.name.split("-")[0])
    pool, pool64 = start.clone(), start.double()
    slots = torch.randperm(n + 2, generator=gen)[:n].to(torch.int32)
    init = torch.arange(n) % 2 == 0
    pool[slots[~init].long()] = float("nan")  # a new sequence must not read its row
    args = ssd_inputs(sum(lengths), H, P, G, N, generator=gen, dtype=dtype)
    cu = random_cu_seqlens(lengths)
    pos = torch.tensor(lengths, dtype=torch.int64) - 1
    errs = []
    split = dict(chunk_size=chunk_size, intra_chunk_dtype=intra)
    y = impl.ssd_prefill(*args, pool, slots, cu, init, **split, fmt=fmt, sr_seed=5, positions=pos)
    y64 = reference.ssd_prefill(*args, pool64, slots, cu, init, **split, fmt=fmt, sr_seed=5, positions=pos)
    prefill_err = float((y.double() - y64).abs().max() / y64.abs().max())
    for _ in range(2):
        step = ssd_inputs(n, H, P, G, N, generator=gen, dtype=dtype)
        pos = pos + 1
        y = impl.ssd_decode(*step, pool, slots, fmt=fmt, sr_seed=5, positions=pos)
        y64 = reference.ssd_decode(*step, pool64, slots, fmt=fmt, sr_seed=5, positions=pos)
        errs.append(float((y.double() - y64).abs().max() / y64.abs().max()))
    return prefill_err, max(errs), pool[slots.long()], pool64[slots.long()]


def _check_case(case, fmt):
    from evalkit.kernels import parse_format

    prefill_err, decode_err, stored, ref = case
    assert prefill_err < 1e-5
    assert decode_err < 1e-5 + 4 * 2.0 ** -parse_format(fmt).bits
    if fmt == "fp32":
        torch.testing.assert_close(stored.double(), ref, rtol=1e-5, atol=1e-5)
    else:
        check_stored_like_reference(stored, ref, fmt)


@cpu_only
@pytest.mark.parametrize("fmt", FORMATS)
def test_cpu_equals_reference_every_format(fmt):
    _check_case(_prefill_case(cpu, fmt, _gen(1)), fmt)


@cpu_only
def test_cpu_chunk_size_changes_no_stored_bit_of_consequence():
    """The CPU chunk is a work split: chunks of 4 and 64 agree to fp32 error."""
    a = _prefill_case(cpu, "fp32", _gen(2), chunk_size=4)
    b = _prefill_case(cpu, "fp32", _gen(2), chunk_size=64)
    torch.testing.assert_close(a[2], b[2], rtol=1e-5, atol=1e-5)


@cpu_only
def test_bad_input_is_refused():
    args = ssd_inputs(2, H, P, G, N)
    pool = torch.zeros(3, H, P, N)
    with pytest.raises(KernelInputError, match="state_pool must be"):
        cpu.ssd_decode(*args, torch.zeros(3, H, N, P), torch.tensor([0, 1]))
    with pytest.raises(KernelInputError, match="must divide the heads"):
        bad = ssd_inputs(2, H, P, 3, N)
        cpu.ssd_decode(*bad, torch.zeros(3, H, P, N), torch.tensor([0, 1]))
    with pytest.raises(KernelInputError, match="needs the positions"):
        cpu.ssd_decode(*args, pool.half(), torch.tensor([0, 1]), fmt="fp16-sr")


# ----------------------------------------------------------------------------- Triton (interpreted)
@pytest.fixture
def triton_ops():
    mods = interpreted_modules(
        decode="evalkit.kernels.ssd_decode.wrapper", prefill="evalkit.kernels.ssd_prefill.wrapper"
    )
    assert type(mods.decode.ssd_decode_kernel).__name__ == "InterpretedFunction"

    class Ops:
        ssd_decode = staticmethod(mods.decode.ssd_decode)
        ssd_prefill = staticmethod(mods.prefill.ssd_prefill)
        Tile = mods.prefill.Tile

    return Ops


@pytest.mark.parametrize("fmt", TRITON_FORMATS)
def test_triton_equals_reference_every_format(triton_ops, fmt):
    _check_case(_prefill_case(triton_ops, fmt, _gen(3)), fmt)


def _intra_case(impl):
    """bf16 intra-chunk rounding every 16 tokens: the outputs after each boundary equal the
    reference's to a bf16 step (a carried value the fp32 error moves across a rounding threshold)
    and move away from the unrounded ones by more than fp32 error."""
    args = ssd_inputs(40, H, P, G, N, generator=_gen(8))
    one = (torch.tensor([0]), random_cu_seqlens([40]), torch.tensor([False]))

    def run(ops, intra, dtype=torch.float32):
        pool = torch.zeros(1, H, P, N, dtype=dtype)
        return ops.ssd_prefill(*args, pool, *one, chunk_size=16, intra_chunk_dtype=intra).double(), pool

    y, pool = run(impl, torch.bfloat16)
    y64, pool64 = run(reference, torch.bfloat16, torch.float64)
    plain = run(impl, None)[0]
    scale = y64.abs().max()
    assert (y - y64).abs().max() < 4 * 2.0**-8 * scale
    torch.testing.assert_close(y[:16], plain[:16], rtol=0, atol=1e-5 * float(scale))  # before the first store
    assert (y[16:20] - plain[16:20]).abs().max() > 1e-4 * scale
    assert (y[16:20] - y64[16:20]).abs().max() < 1e-4 * scale  # most rounded values agree exactly


@cpu_only
def test_cpu_intra_chunk_rounding():
    _intra_case(cpu)


def test_triton_intra_chunk_rounding(triton_ops):
    _intra_case(triton_ops)


def test_triton_bf16_model_dtype(triton_ops):
    err, _, stored, ref = _prefill_case(triton_ops, "bf16", _gen(4), lengths=(20, 3), dtype=torch.bfloat16)
    assert err < 1e-2  # y is returned in bf16
    check_stored_like_reference(stored, ref, "bf16")


def _twin_launches(checker, fmt, gen):
    lengths = [int(torch.randint(1, 40, (), generator=gen)), 7]
    args = ssd_inputs(sum(lengths), H, P, G, N, generator=gen)
    from evalkit.kernels import parse_format

    f = parse_format(fmt)
    pool = round_to_format(
        torch.randn(4, H, P, N, generator=gen), f.storage if f.storage != "fp32" else "fp32"
    )
    pos = torch.tensor([50, 9])
    slots = torch.tensor([3, 0], dtype=torch.int32)
    checker.ssd_prefill(
        *args, pool, slots, random_cu_seqlens(lengths), torch.tensor([True, False]), chunk_size=16,
        fmt=fmt, sr_seed=2, positions=pos,
    )  # fmt: skip
    step = ssd_inputs(2, H, P, G, N, generator=gen)
    checker.ssd_decode(*step, pool, slots, fmt=fmt, sr_seed=2, positions=pos + 1)


@pytest.mark.parametrize("fmt", ["fp16", "fp8_e4m3-sr", "m3-rtz"])
def test_twin_passes_on_real_kernels_and_fails_on_wrong_builds(triton_ops, fmt):
    ok = TwinChecker(raise_on_mismatch=True)
    _twin_launches(ok, fmt, _gen(5))
    assert ok.checked == 2 and ok.passed == 2
    assert set(ok.stats) == {f"ssd_prefill/{fmt}", f"ssd_decode/{fmt}"}
    wrong = TwinChecker(rounding="wrong")
    _twin_launches(wrong, fmt, _gen(5))
    assert wrong.checked == 2 and wrong.passed == 0
    if fmt == "fp16":  # raising at the first failure (one format is enough)
        with pytest.raises(TwinMismatch):
            _twin_launches(TwinChecker(rounding="wrong", raise_on_mismatch=True), fmt, _gen(5))


def test_triton_prefill_refuses_a_bad_chunk(triton_ops):
    args = ssd_inputs(3, H, P, G, N)
    with pytest.raises(KernelInputError, match="power of 2"):
        triton_ops.ssd_prefill(
            *args, torch.zeros(1, H, P, N), torch.tensor([0]), random_cu_seqlens([3]), torch.tensor([False]),
            chunk_size=12,
        )  # fmt: skip


def test_not_interpreting_runs_cpu_by_default():
    if INTERPRETING:
        pytest.skip("the plain run checks the CPU dispatch")
    from evalkit.kernels import dispatch

    assert dispatch.implementation("ssd_decode", torch.zeros(1)) is cpu.ssd_decode


# ----------------------------------------------------------------------------- the conv's bias
def _conv_case(impl, gen):
    """Prefill (a carried and a new sequence) + one decode step of the short conv with a bias, on
    `impl` and on torch's own conv1d (zero-padded causal, bias, SiLU: transformers' Mamba2 conv)."""
    Cc, W, lengths = 12, 4, [9, 2]
    x = torch.randn(sum(lengths), Cc, generator=gen)
    w, b = torch.randn(Cc, W, generator=gen), torch.randn(Cc, generator=gen)
    pool = torch.randn(3, Cc, W - 1, generator=gen)
    prev = pool[2].clone()
    slots, init = torch.tensor([2, 0]), torch.tensor([True, False])
    y = impl.causal_conv1d_prefill(x, w, pool, slots, random_cu_seqlens(lengths), init, bias=b)
    step = torch.randn(2, Cc, generator=gen)
    yd = impl.causal_conv1d_decode(step, w, pool, slots, bias=b)
    seqs = [torch.cat([prev, x[:9].T, step[0, :, None]], 1), torch.cat([x[9:].T, step[1, :, None]], 1)]
    want = [F.silu(F.conv1d(F.pad(s, (W - 1, 0))[None], w[:, None], b, groups=Cc)[0]).T for s in seqs]
    torch.testing.assert_close(y[:9].double(), want[0][W - 1 : W - 1 + 9].double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y[9:].double(), want[1][:2].double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(yd[0].double(), want[0][-1].double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(yd[1].double(), want[1][-1].double(), rtol=1e-5, atol=1e-5)


@cpu_only
def test_conv_bias_cpu_and_reference():
    _conv_case(cpu, _gen(6))
    _conv_case(reference, _gen(6))


def test_conv_bias_triton(triton_ops):
    from evalkit.kernels.short_conv import wrapper

    _conv_case(wrapper, _gen(7))


def _small_tile_run(ops, fmt, chunk_size, intra, *, P2=24, N2=48):
    """A prefill at dims that a 16-row, 16-column, 16-token tile splits (two state-row programs,
    the second part-masked; three N blocks; two token blocks per 32-token chunk)."""
    from evalkit.kernels import parse_format

    gen = _gen(11)
    f = parse_format(fmt)
    args = ssd_inputs(37 + 21, H, P2, G, N2, generator=gen)
    pool = round_to_format(torch.randn(3, H, P2, N2, generator=gen) * 0.5, f.name.split("-")[0])
    pool64 = pool.double()
    one = (torch.tensor([2, 0], dtype=torch.int32), random_cu_seqlens([37, 21]), torch.tensor([True, False]))
    kw = dict(
        chunk_size=chunk_size, intra_chunk_dtype=intra, fmt=f, sr_seed=3, positions=torch.tensor([40, 20])
    )
    tile = dict(tile=ops.Tile(bt=16, bp=16, bn=16, num_warps=4, num_stages=2)) if ops is not reference else {}
    y = ops.ssd_prefill(*args, pool if ops is not reference else pool64, *one, **kw, **tile)
    return y.double(), (pool if ops is not reference else pool64)[[2, 0]]


@pytest.mark.parametrize("fmt", ["fp32", "bf16-sr"])
def test_triton_small_tile_splits_rows_columns_and_tokens(triton_ops, fmt):
    y, stored = _small_tile_run(triton_ops, fmt, 32, None)
    y64, ref = _small_tile_run(reference, fmt, 32, None)
    assert float((y - y64).abs().max() / y64.abs().max()) < 1e-5
    if fmt == "fp32":
        torch.testing.assert_close(stored.double(), ref, rtol=1e-5, atol=1e-5)
    else:
        check_stored_like_reference(stored, ref, fmt)


def test_triton_small_tile_rounds_per_chunk_not_per_block(triton_ops):
    """bf16 intra rounding with 32-token chunks walked in 16-token blocks: the outputs follow the
    reference that rounds every 32 tokens, not the one that rounds every 16."""
    y = _small_tile_run(triton_ops, "fp32", 32, torch.bfloat16)[0]
    y32 = _small_tile_run(reference, "fp32", 32, torch.bfloat16)[0]
    y16 = _small_tile_run(reference, "fp32", 16, torch.bfloat16)[0]
    assert (y - y32).abs().mean() * 10 < (y - y16).abs().mean()


def test_triton_empty_sequence_keeps_its_state(triton_ops):
    """A zero-length sequence in the batch stores its incoming state unchanged (a new one: zeros)."""
    args = ssd_inputs(5, H, P, G, N, generator=_gen(12))
    pool = torch.randn(4, H, P, N, generator=_gen(13)).half()
    start, pool64 = pool.clone(), pool.double()
    one = (
        torch.tensor([1, 3, 2], dtype=torch.int32),
        torch.tensor([0, 0, 0, 5]),
        torch.tensor([True, False, True]),
    )
    y = triton_ops.ssd_prefill(*args, pool, *one, chunk_size=16)
    y64 = reference.ssd_prefill(*args, pool64, *one, chunk_size=16, fmt="fp16")
    assert float((y.double() - y64).abs().max() / y64.abs().max()) < 1e-5
    assert torch.equal(pool[1], start[1]) and not pool[3].any()
    torch.testing.assert_close(pool.double(), pool64, rtol=0, atol=1e-3)


def _variant_run(ops, fmt, intra, variant, tile):
    """A batch of a carried, an empty and a new sequence through the Triton prefill `variant`."""
    from evalkit.kernels import parse_format

    gen = _gen(12)
    f = parse_format(fmt)
    P2, N2, lengths = 24, 48, [37, 0, 21]
    args = ssd_inputs(sum(lengths), H, P2, G, N2, generator=gen)
    pool = round_to_format(torch.randn(4, H, P2, N2, generator=gen) * 0.5, f.name.split("-")[0])
    slots = torch.tensor([2, 3, 0], dtype=torch.int32)
    init = torch.tensor([True, True, False])
    kw = dict(chunk_size=32, intra_chunk_dtype=intra, fmt=f, sr_seed=3, positions=torch.tensor([40, 7, 20]))
    y = ops.ssd_prefill(
        *args, pool, slots, random_cu_seqlens(lengths), init, **kw, tile=tile, variant=variant
    )
    return y, pool


@pytest.mark.parametrize(
    "fmt, intra", [("fp32", None), ("bf16-sr", torch.bfloat16), ("fp8_e4m3-sr", None), ("m5", torch.float16)]
)
def test_triton_split_prefill_equals_the_walk_bit_for_bit(triton_ops, fmt, intra):
    """The split build (a sequential state pass, then every block's output in parallel) runs the
    walk kernel's arithmetic: outputs and every stored state equal to the last bit, on a tile that
    splits state rows, columns and tokens (the default tile too), with a carried, an empty and a
    new sequence and intra-chunk rounding."""
    small = triton_ops.Tile(bt=16, bp=16, bn=16, num_warps=4, num_stages=2)
    for tile in (small, None):
        y_walk, pool_walk = _variant_run(triton_ops, fmt, intra, "walk", tile)
        y_split, pool_split = _variant_run(triton_ops, fmt, intra, "split", tile)
        assert y_walk.abs().max() > 0.1
        assert torch.equal(y_split, y_walk)
        assert torch.equal(pool_split.view(torch.uint8), pool_walk.view(torch.uint8))


def test_triton_prefill_refuses_an_unknown_variant(triton_ops):
    args = ssd_inputs(3, H, P, G, N)
    with pytest.raises(KernelInputError, match="variant must be one of walk, split"):
        triton_ops.ssd_prefill(
            *args, torch.zeros(1, H, P, N), torch.tensor([0]), random_cu_seqlens([3]), torch.tensor([False]),
            variant="fast",
        )  # fmt: skip
