"""Triton kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1) against the float64 reference.

Fresh random inputs each run; outputs are poisoned with NaN before each launch so an element the
kernel forgets to write fails; pool rows of new sequences are NaN so reading them fails.
The interpreter must be on before `triton` is first imported, so in a normal test run the single
test `test_module_under_triton_interpreter` re-runs this module in a fresh process with
TRITON_INTERPRET=1, where the other tests execute."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import STATE_DTYPES, KernelInputError, cpu, reference
from evalkit.kernels.kda_decode import reference as decode_reference
from evalkit.kernels.kda_prefill.naive import naive_chunked_kda
from evalkit.kernels.testing import (
    check_rounded_like_reference,
    kda_inputs,
    random_cu_seqlens,
    random_pool,
)
from tests.helpers.interpreter import interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err

H = 2


test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


@pytest.fixture(scope="module")
def tk():
    return interpreted_modules(
        decode="evalkit.kernels.kda_decode.wrapper",
        prefill="evalkit.kernels.kda_prefill.wrapper",
        conv="evalkit.kernels.short_conv.wrapper",
        norm="evalkit.kernels.gated_rmsnorm.wrapper",
    )


def nan_out(n, V, dtype=torch.float32):
    return torch.full((n, H, V), float("nan"), dtype=dtype)


# ------------------------------------------------------------------------------------------ decode


@pytest.mark.parametrize("pool_name", list(STATE_DTYPES))
def test_decode_matches_reference(tk, pool_name):
    dt = STATE_DTYPES[pool_name]
    K, V, B, S = 16, 32, 3, 7
    x = kda_inputs(B, H, K, V)
    pool = random_pool(S, H, K, V, dt)
    slots = torch.randperm(S)[:B].to(torch.int32)
    before = pool.clone()
    pool_ref = pool.clone().double()
    o = tk.decode.kda_decode(*x.args(), pool, slots, out=nan_out(B, V))
    o_ref = reference.kda_decode(*x.args(), pool_ref, slots)
    assert rel_err(o, o_ref) < 1e-5
    touched = torch.zeros(S, dtype=torch.bool)
    touched[slots.long()] = True
    assert torch.equal(pool[~touched], before[~touched])  # untouched slots bit-identical
    if dt == torch.float32:
        assert rel_err(pool[touched], pool_ref[touched]) < 1e-5
    else:  # the reference rounded the same way (float64 -> 16-bit once; the kernel fp32 -> 16-bit)
        check_rounded_like_reference(pool[touched], pool_ref[touched])
        assert not torch.equal(pool[touched], before[touched])


def test_decode_public_api_bf16_model_dtype(tk):
    from evalkit.kernels import kda_decode

    K = V = 32
    x = kda_inputs(2, H, K, V, dtype=torch.bfloat16)
    pool = random_pool(3, H, K, V, torch.float16)
    pool_ref = pool.clone().double()
    o = kda_decode(*x.args(), pool, torch.tensor([2, 0]))
    assert o.dtype == torch.bfloat16
    assert rel_err(o, reference.kda_decode(*x.args(), pool_ref, torch.tensor([2, 0]))) < 1e-2


def test_decode_refuses_unknown_pool_dtype(tk):
    x = kda_inputs(1, H, 16, 16)
    with pytest.raises(KernelInputError, match="supported"):
        tk.decode.kda_decode(*x.args(), torch.zeros(1, H, 16, 16, dtype=torch.float64), torch.tensor([0]))


# the decode kernel's build options (DecodeTile), one at a time and all together
DECODE_OPTIONS = [
    {}, {"VEC": 1}, {"VEC": 2}, {"VEC": 8}, {"even": True}, {"cache": "evict_first"}, {"cache": "stream"},
    {"v_inner": True}, {"early": True}, {"even": True, "cache": "stream", "v_inner": True, "early": True},
    {"VEC": 8, "even": True, "cache": "evict_first", "v_inner": True, "early": True},
    {"persist": 1}, {"persist": 2, "even": True, "early": True}, {"persist": 64},
    {"reload": True}, {"reload": True, "even": True, "cache": "stream", "v_inner": True, "early": True},
]  # fmt: skip
DECODE_OPTION_FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp16-sr", "m3-rtz"]


def _option_id(opts: dict) -> str:
    return "+".join(f"{k}={v}" for k, v in opts.items()) or "plain"


@pytest.mark.parametrize("opts", DECODE_OPTIONS, ids=_option_id)
@pytest.mark.parametrize("K, V, BV", [(16, 32, 16), (12, 24, 16)], ids=["even-dims", "ragged-dims"])
def test_decode_tile_options_match_reference_and_their_fp32_twin(tk, opts, K, V, BV):
    """Every build option computes what the plain build computes: the fp32-pool launch of the tile
    matches the float64 reference; a launch on each rounding pool with the same tile gives outputs
    bit-identical to it and stores exactly its state rounded the format's way (the twin rule; on
    ragged dims `even` falls back to the masked build, V_INNER covers a partial last block). The
    interpreter sums without a register layout, so VEC = 8 passes here too: that it is not
    twin-safe on the GPU is test_kernels_compile.py's to show."""
    from evalkit.kernels import parse_format, round_to_format
    from evalkit.kernels.twin_check import bit_equal

    tile = tk.decode.DecodeTile(BV, 2, **opts)
    B, S = 3, 6
    x = kda_inputs(B, H, K, V)
    slots = torch.tensor([4, 0, 2], dtype=torch.int32)
    idx = slots.long()
    pos = torch.randint(0, 10**6, (B,))
    pool32 = random_pool(S, H, K, V, torch.float32)
    pool_ref = pool32.clone().double()
    pool_plain = pool32.clone()
    o32 = tk.decode.kda_decode(*x.args(), pool32, slots, out=nan_out(B, V), config=tile)
    o_ref = reference.kda_decode(*x.args(), pool_ref, slots)
    assert rel_err(o32, o_ref) < 1e-5 and rel_err(pool32[idx], pool_ref[idx]) < 1e-5
    if tile.persist or tile.reload:  # a persistent grid walks the same tiles; reload re-reads them
        plain = tile._replace(persist=0, reload=False)
        o_plain = tk.decode.kda_decode(*x.args(), pool_plain, slots, out=nan_out(B, V), config=plain)
        assert bit_equal(o32, o_plain) and bit_equal(pool32, pool_plain)
    for name in DECODE_OPTION_FORMATS:
        fmt = parse_format(name)
        pool = round_to_format(random_pool(S, H, K, V, torch.float32), name.split("-")[0])
        before = pool.clone()
        twin = pool.to(torch.float32, copy=True)  # exact widening: the twin starts from the same state
        store = {"sr_seed": 5, "positions": pos}
        o_twin = tk.decode.kda_decode(*x.args(), twin, slots, out=nan_out(B, V), config=tile)
        o = tk.decode.kda_decode(*x.args(), pool, slots, out=nan_out(B, V), config=tile, fmt=fmt, **store)
        assert bit_equal(o, o_twin), f"{name}: outputs differ from the fp32 twin"
        assert bit_equal(pool[idx], round_to_format(twin[idx], fmt, **store)), f"{name}: stored state"
        rest = torch.ones(S, dtype=torch.bool)
        rest[idx] = False
        assert bit_equal(pool[rest], before[rest]), f"{name}: untouched slots changed"


def test_decode_tiles_are_checked_and_the_defaults_are_twin_safe(tk):
    from evalkit.kernels import parse_format

    w = tk.decode
    assert w.as_tile((64, 4)) == w.DecodeTile(64, 4, w.VEC, False, "", False, False, 0, False)
    assert w.DecodeTile(64, 4, 4, True, "stream", True, True).label() == "64x4+even+stream+vinner+early"
    assert w.DecodeTile(64, 4, early=True, persist=8).label() == "64x4+early+persist8"
    assert w.DecodeTile(64, 4, even=True, reload=True).label() == "64x4+even+reload"
    for bad in [
        (48, 4),
        (64, 4, 3),
        (64, 0),
        (64, 4, 4, False, "lru"),
        (64, 4, 4, False, "", False, False, -1),
        (64, 4, 4, False, "", False, False, 2, True),  # persist and reload do not combine
    ]:
        with pytest.raises(KernelInputError):
            w.as_tile(bad)
    assert not w.DecodeTile(64, 4, 8).twin_safe and w.DecodeTile(4, 4, 8).twin_safe  # VEC <= BV
    for name in ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp16-sr", "m7"):
        assert w.decode_config(parse_format(name), 128).twin_safe, name


# ------------------------------------------------------------------------------------------ prefill


def _prefill_case(lengths, K, V, dt, init):
    T, N = sum(lengths), len(lengths)
    S = N + 2
    x = kda_inputs(T, H, K, V)
    pool = random_pool(S, H, K, V, dt)
    slots = torch.randperm(S)[:N].to(torch.int32)
    init = torch.tensor(init)
    pool[slots[~init].long()] = float("nan")  # new sequences must not read their slot
    return x, pool, slots, random_cu_seqlens(lengths), init


@pytest.mark.parametrize("pool_name", ["fp32", "bf16"])
def test_prefill_matches_reference(tk, pool_name):
    dt = STATE_DTYPES[pool_name]
    lengths = [int(torch.randint(65, 140, ())), 1, int(torch.randint(2, 64, ()))]
    x, pool, slots, cu, init = _prefill_case(lengths, 16, 32, dt, [True, False, False])
    before = pool.clone()
    pool_ref = pool.clone().double()
    o = tk.prefill.kda_prefill(*x.args(), pool, slots, cu, init, out=nan_out(sum(lengths), 32))
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-4
    touched = torch.zeros(pool.shape[0], dtype=torch.bool)
    touched[slots.long()] = True
    assert torch.equal(before[~touched].nan_to_num(7.0), pool[~touched].nan_to_num(7.0))
    if dt == torch.float32:
        assert rel_err(pool[touched], pool_ref[touched]) < 1e-4
    else:
        check_rounded_like_reference(pool[touched], pool_ref[touched])


def test_prefill_intra_chunk_bf16_rounds_the_carried_state(tk):
    """One launch with bf16 chunk-boundary states == two launches with the state rounded to bf16
    (by torch, RTNE) in between, bit for bit; and close to the reference of that arm."""
    first = 64
    T = first + int(torch.randint(2, 60, ()))
    x = kda_inputs(T, H, 16, 16)
    pool = random_pool(1, H, 16, 16, torch.float32)
    slot, yes = torch.tensor([0], dtype=torch.int32), torch.tensor([True])
    pool_one, pool_two, pool_ref = pool.clone(), pool.clone(), pool.double()
    o_one = tk.prefill.kda_prefill(*x.args(), pool_one, slot, random_cu_seqlens([T]), yes,
                                   intra_chunk_dtype=torch.bfloat16)  # fmt: skip

    def piece(a, b):
        cu = random_cu_seqlens([b - a])
        return tk.prefill.kda_prefill(*x.rows(slice(a, b)).args(), pool_two, slot, cu, yes)

    o_a = piece(0, first)
    pool_two.copy_(pool_two.to(torch.bfloat16).float())
    o_b = piece(first, T)
    assert torch.equal(o_one, torch.cat([o_a, o_b])) and torch.equal(pool_one, pool_two)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slot, random_cu_seqlens([T]), yes,
                                  intra_chunk_dtype=torch.bfloat16)  # fmt: skip
    assert rel_err(o_one, o_ref) < 1e-2  # a boundary value may round the other way (double rounding)


def test_prefill_equals_decode_steps_fp32(tk):
    T, K, V = int(torch.randint(66, 80, ())), 16, 16
    x = kda_inputs(T, H, K, V)
    pool_a = random_pool(2, H, K, V, torch.float32)
    pool_b = pool_a.clone()
    slot = torch.tensor([1], dtype=torch.int32)
    o_pre = tk.prefill.kda_prefill(*x.args(), pool_a, slot, random_cu_seqlens([T]), torch.tensor([True]))
    o_dec = torch.cat([tk.decode.kda_decode(*x.rows(slice(t, t + 1)).args(), pool_b, slot) for t in range(T)])
    assert rel_err(o_dec, o_pre) < 1e-5
    assert rel_err(pool_b, pool_a) < 1e-5


def test_prefill_in_pieces_equals_one_piece(tk):
    K = V = 16
    cut = int(torch.randint(1, 70, ()))
    T = cut + int(torch.randint(1, 70, ()))
    x = kda_inputs(T, H, K, V)
    pool_a = random_pool(1, H, K, V, torch.float32)
    pool_b = pool_a.clone()
    slot = torch.tensor([0], dtype=torch.int32)
    yes = torch.tensor([True])
    o_one = tk.prefill.kda_prefill(*x.args(), pool_a, slot, random_cu_seqlens([T]), yes)
    o_1 = tk.prefill.kda_prefill(*x.rows(slice(0, cut)).args(), pool_b, slot, random_cu_seqlens([cut]), yes)
    o_2 = tk.prefill.kda_prefill(
        *x.rows(slice(cut, T)).args(), pool_b, slot, random_cu_seqlens([T - cut]), yes
    )
    # fp32 rounding along other chunk boundaries: pool error median 2.2e-6, max 6.9e-6 in 60 draws
    # (the stream variant, interpreter; the same before its prep/diag change), 1.3e-5 once in CI
    assert rel_err(torch.cat([o_1, o_2]), o_one) < 3e-5
    assert rel_err(pool_b, pool_a) < 3e-5


def test_prefill_refuses_other_chunk_sizes(tk):
    x = kda_inputs(4, H, 16, 16)
    with pytest.raises(KernelInputError, match="chunks of 64"):
        tk.prefill.kda_prefill(
            *x.args(),
            random_pool(1, H, 16, 16, torch.float32),
            torch.tensor([0]),
            random_cu_seqlens([4]),
            torch.tensor([False]),
            chunk_size=32,
        )


def test_naive_chunked_form_matches_reference():
    """The algebra of the chunked kernel, in float64 torch, against the token-by-token reference."""
    T, K, V = 150, 8, 8
    x = kda_inputs(T, H, K, V)
    S0 = torch.randn(H, K, V, dtype=torch.float64)
    qn, kn = decode_reference.l2norm(x.q) * K**-0.5, decode_reference.l2norm(x.k)
    g, beta = decode_reference.gate(x.g_raw, x.A_log, x.dt_bias), torch.sigmoid(x.beta_raw.double())
    o, S = naive_chunked_kda(qn, kn, x.v.double(), g, beta, S0)
    pool = S0[None].clone()
    o_ref = reference.kda_prefill(
        *x.args(), pool, torch.tensor([0]), random_cu_seqlens([T]), torch.tensor([True])
    )
    assert rel_err(o, o_ref) < 1e-9 and rel_err(S, pool[0]) < 1e-9


# ------------------------------------------------------------------------------------ conv + norm


def test_conv_prefill_and_decode_match_reference(tk):
    C, W = 80, 4
    lengths = [int(torch.randint(1, 3, ())), 0, int(torch.randint(60, 140, ())), 2]
    x = torch.randn(sum(lengths), C)
    w = torch.randn(C, W)
    pool = torch.randn(6, C, W - 1)
    slots = torch.tensor([3, 0, 2, 5], dtype=torch.int32)
    init = torch.tensor([True, False, True, False])
    pool[slots[~init].long()] = float("nan")
    pool_ref = pool.clone()
    y = tk.conv.causal_conv1d_prefill(x, w, pool, slots, random_cu_seqlens(lengths), init)
    y_ref = reference.causal_conv1d_prefill(x, w, pool_ref, slots, random_cu_seqlens(lengths), init)
    assert rel_err(y, y_ref) < 1e-6
    assert torch.equal(pool.nan_to_num(7.0), pool_ref.to(pool.dtype).nan_to_num(7.0))
    xd = torch.randn(4, C)
    yd = tk.conv.causal_conv1d_decode(xd, w, pool, slots)
    assert rel_err(yd, reference.causal_conv1d_decode(xd, w, pool_ref, slots)) < 1e-6
    assert torch.equal(pool.nan_to_num(7.0), pool_ref.to(pool.dtype).nan_to_num(7.0))


@pytest.mark.parametrize("impl", ["triton", "cpu"])
def test_conv_reads_strided_rows_and_writes_channel_groups(tk, impl):
    """x a column slice of a wider projection (KDA's qkv) and y as three contiguous groups: the same
    values, bit for bit, as the contiguous input and the plain [T, C] output; the same pool after."""
    conv = tk.conv if impl == "triton" else cpu
    C, W, wide = 3 * 64, 4, 3 * 64 + 48  # 64-channel groups: whole channel blocks of the kernel
    lengths = [37, 0, 70, 1]
    proj = torch.randn(sum(lengths), wide, dtype=torch.bfloat16)
    x = proj[:, :C]
    w = torch.randn(C, W)
    pool = torch.randn(5, C, W - 1).to(torch.bfloat16)
    slots = torch.tensor([3, 0, 2, 4], dtype=torch.int32)
    init = torch.tensor([True, False, True, False])
    pools = [pool.clone(), pool.clone()]
    y = conv.causal_conv1d_prefill(x.contiguous(), w, pools[0], slots, random_cu_seqlens(lengths), init)
    yg = conv.causal_conv1d_prefill(x, w, pools[1], slots, random_cu_seqlens(lengths), init, groups=3)
    assert yg.shape == (3, x.shape[0], 64) and all(t.is_contiguous() for t in yg)
    assert torch.equal(yg, y.view(-1, 3, 64).transpose(0, 1)) and torch.equal(pools[0], pools[1])
    xd = torch.randn(4, wide, dtype=torch.bfloat16)[:, :C]
    y = conv.causal_conv1d_decode(xd.contiguous(), w, pools[0], slots)
    yg = conv.causal_conv1d_decode(xd, w, pools[1], slots, groups=3)
    assert torch.equal(yg, y.view(-1, 3, 64).transpose(0, 1)) and torch.equal(pools[0], pools[1])
    with pytest.raises(KernelInputError, match="groups must be a positive divisor"):
        conv.causal_conv1d_decode(xd, w, pools[1], slots, groups=5)


def test_conv_tiles_change_no_bit(tk):
    """A prefill program convolves block_t rows x block_c channels, a decode program block_c
    channels; any tile gives every output and pool bit of the default's (partial blocks, a new and
    a continued sequence, an empty one included)."""
    C, W = 3 * 128, 4
    lengths = [37, 0, 70, 1]
    proj = torch.randn(sum(lengths), C + 40, dtype=torch.bfloat16)
    w = torch.randn(C, W).to(torch.bfloat16)
    pool = torch.randn(7, C, W - 1).to(torch.bfloat16)
    slots = torch.tensor([3, 0, 6, 4], dtype=torch.int32)
    init = torch.tensor([True, False, True, False])
    tiles = [(None, None), (64, 256), (16, 32)]
    pools = [pool.clone() for _ in tiles]
    ys = [
        tk.conv.causal_conv1d_prefill(
            proj[:, :C], w, p, slots, random_cu_seqlens(lengths), init, groups=3, block_t=bt, block_c=bc
        )
        for p, (bt, bc) in zip(pools, tiles)
    ]
    assert all(torch.equal(ys[0], y) for y in ys[1:]) and all(torch.equal(pools[0], p) for p in pools[1:])
    x = torch.randn(4, C + 40, dtype=torch.bfloat16)[:, :C]
    ys = [
        tk.conv.causal_conv1d_decode(x, w, p, slots, groups=3, block_c=bc) for p, (_, bc) in zip(pools, tiles)
    ]
    assert all(torch.equal(ys[0], y) for y in ys[1:]) and all(torch.equal(pools[0], p) for p in pools[1:])
    for bad in (48, 0):
        with pytest.raises(KernelInputError, match="block_c must be a power of two"):
            tk.conv.causal_conv1d_decode(x, w, pool, slots, block_c=bad)
    with pytest.raises(KernelInputError, match="block_t must be a power of two"):
        tk.conv.causal_conv1d_prefill(
            proj[:, :C], w, pool, slots, random_cu_seqlens(lengths), init, block_t=3
        )


def test_gated_rmsnorm_matches_reference(tk):
    o, g, w = torch.randn(5, H, 48), torch.randn(5, H, 48), torch.randn(48)
    y = tk.norm.gated_rmsnorm(o.to(torch.bfloat16), g, w, 1e-5)
    assert y.dtype == torch.bfloat16
    assert rel_err(y, reference.gated_rmsnorm(o.to(torch.bfloat16), g, w, 1e-5)) < 1e-2
    assert rel_err(tk.norm.gated_rmsnorm(o, g, w, 1e-5), reference.gated_rmsnorm(o, g, w, 1e-5)) < 1e-6
