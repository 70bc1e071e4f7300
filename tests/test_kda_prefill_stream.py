"""The stream prefill (variant "stream", kernels/kda_prefill/stream.py) in Triton's CPU interpreter:
against the float64 reference, its chunk-local tensors against the split path's, with the output
fused into the scan or not, head dims that are not powers of two, strong decay, bf16 chunk-boundary
states, the production form (bf16 operands: close to the reference, measurably less close than
fp32) and the fp32-twin check (a 16-bit pool's store is its fp32 twin's, rounded; a truncating
build is caught).

Like tests/test_kernels_triton.py, the module re-runs itself under TRITON_INTERPRET=1."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import KernelInputError, reference
from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool
from evalkit.kernels.twin_check import TwinChecker
from tests.helpers.interpreter import interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err
from tests.helpers.prefill_cases import prefill_case

H = 2

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


@pytest.fixture(scope="module")
def pw():
    return interpreted_modules(prefill="evalkit.kernels.kda_prefill.wrapper").prefill


def _case(lengths, K, V, init, *, strong_decay=0.2):
    return prefill_case(lengths, H, K, V, init, strong_decay=strong_decay)


def _against_reference(pw, x, pool, slots, cu, init, **kw):
    """(output error, stored-state error) of the stream variant against the float64 reference."""
    T, V = x.v.shape[0], x.v.shape[-1]
    pool_ref = pool.clone().double()
    o_ref = reference.kda_prefill(
        *x.args(), pool_ref, slots, cu, init, intra_chunk_dtype=kw.get("intra_chunk_dtype")
    )
    out = torch.full((T, H, V), float("nan"))
    o = pw.kda_prefill(*x.args(), pool, slots, cu, init, out=out, variant="stream", **kw)
    s = slots.long()
    assert torch.isfinite(o).all()
    return rel_err(o, o_ref), rel_err(pool[s], pool_ref[s])


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("init", [[True, False, True], [False, False, False]])
def test_stream_matches_reference(pw, monkeypatch, init, fuse):
    """Three sequences with partial last chunks (one of a single token), initial state on/off, the
    output computed in the scan or by its own launch."""
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["scan"] = (16, 4, 1, fuse)
    monkeypatch.setattr(pw, "STREAM_TILES", tiles)
    lengths = [int(torch.randint(65, 140, ())), 1, int(torch.randint(2, 64, ()))]
    err_o, err_s = _against_reference(pw, *_case(lengths, 16, 32, init))
    assert err_o < 1e-4 and err_s < 1e-4


@pytest.mark.parametrize("fuse", [True, False])
def test_stream_bit_split_products_match_reference(pw, monkeypatch, fuse):
    """Every launch's tf32x3 products with the operands split by bit arithmetic (the "split" tile,
    kernels/tf32x3.py): as close to the reference as the default build (the interpreter multiplies
    in full fp32, so a dropped product would be off by ~1e-4 here)."""
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["scan"] = (16, 4, 1, fuse)
    tiles["fp32"]["split"] = ("offdiag", "inverse", "wu", "scan", "output")
    monkeypatch.setattr(pw, "STREAM_TILES", tiles)
    lengths = [int(torch.randint(65, 140, ())), 1, int(torch.randint(2, 64, ()))]
    err_o, err_s = _against_reference(pw, *_case(lengths, 16, 32, [True, False, True]))
    assert err_o < 1e-5 and err_s < 1e-5


def test_stream_presplit_kd_gives_the_same_products(pw, monkeypatch):
    """Kd written as its tf32x3 halves by the wu launch, chunk-transposed, and multiplied as such by
    the scan: in the interpreter (which multiplies in full fp32, the same for both) every output and
    stored-state bit of the scan splitting Kd itself, on sequences with partial chunks (one of a
    single token) and K = 48, V = 24 (the transposed tiles masked past K). A misplaced row, a stale
    column or a dropped half shows. (On the GPU its last bits differ: results/bench/prefill-presplit/.)"""
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["scan"] = (16, 4, 1, False)
    tiles["fp32"]["split"] = ("scan",)
    monkeypatch.setattr(pw, "STREAM_TILES", tiles)
    x, pool, slots, cu, init = _case([int(torch.randint(70, 150, ())), 1, 40], 48, 24, [True, False, True])
    outs = []
    for presplit in (False, True):
        tiles["fp32"]["presplit"] = (presplit,)
        p = pool.clone()
        outs.append((pw.kda_prefill(*x.args(), p, slots, cu, init, variant="stream"), p))
    (o0, s0), (o1, s1) = outs
    assert torch.equal(o0.view(torch.int32), o1.view(torch.int32))
    assert torch.equal(s0.view(torch.int32), s1.view(torch.int32))


@pytest.mark.parametrize("order", ["chunk", "head"])
def test_stream_output_launch_orders(pw, monkeypatch, order):
    """The output launch's programs numbered chunk first or a chunk-head's V blocks first (V = 24
    in two blocks of 16, the second masked past V; K = 48)."""
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["scan"] = (16, 4, 1, False)
    tiles["fp32"]["output"] = (16, 4, 1)
    tiles["fp32"]["output_order"] = (order,)
    monkeypatch.setattr(pw, "STREAM_TILES", tiles)
    err_o, err_s = _against_reference(pw, *_case([int(torch.randint(70, 130, ())), 9], 48, 24, [True, False]))
    assert err_o < 1e-4 and err_s < 1e-4


def test_stream_head_dims_not_powers_of_two(pw):
    """K = 48, V = 24: the state halves, column blocks and tiles are masked past K and V."""
    err_o, err_s = _against_reference(pw, *_case([int(torch.randint(70, 130, ())), 9], 48, 24, [True, False]))
    assert err_o < 1e-4 and err_s < 1e-4


@pytest.mark.parametrize(
    "diag,group,order",
    [
        ((1, 1), "row", "chunk"),
        ((2, 1), "chunk", "column"),
        ((1, 2), "pair", "head"),
        ((4, 1), "pair", "column"),
    ],
)
def test_stream_work_per_program(pw, monkeypatch, diag, group, order):
    """The diagonal blocks per token for one, two or four heads (H = 2: two of four past it; a
    chunk of 9 tokens ends inside a block); the off-diagonal blocks one, a row block's or all six
    per program; the gate's cumsum split over column blocks of 16 (K = 48: three, none masked;
    V = 24); the programs numbered chunk first and head first (and the gate's also column first)."""
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["diag"] = diag
    tiles["fp32"]["offdiag"] = (16, 2, 1, group)
    tiles["fp32"]["prep"] = (16, 1, "exact", order)
    tiles["fp32"]["order"] = (group != "row",)
    monkeypatch.setattr(pw, "STREAM_TILES", tiles)
    lengths = [int(torch.randint(70, 130, ())), 9, 16]
    err_o, err_s = _against_reference(pw, *_case(lengths, 48, 24, [True, False, True]))
    assert err_o < 1e-4 and err_s < 1e-4


def test_stream_chunk_local_equals_split(pw, monkeypatch):
    """Aqk, W, U, Qg, Kd, EGl of the stream launches agree with the split path's to fp32 rounding
    (the same math, summed in another order). Scratch starts as NaN: a row read before it is
    written, or an Aqk entry above the diagonal left unwritten, would show."""
    nan_empty = lambda *a, **kw: torch.full(a[0] if len(a) == 1 else a, float("nan"), **kw)  # noqa: E731
    lengths = [int(torch.randint(130, 192, ())), 17, int(torch.randint(33, 64, ()))]
    x = kda_inputs(sum(lengths), H, 32, 48)
    cs, ce, _, NC = pw.chunk_table(random_cu_seqlens(lengths).tolist(), "cpu")
    args = [t.contiguous() for t in x.args()]
    with monkeypatch.context() as m:
        m.setattr(pw.torch, "empty", nan_empty)
        split = pw.chunk_local(*args, cs, ce, NC)
        stream = pw.stream_local(*args, cs, ce, NC)
    assert torch.equal(stream["EGl"], split["EGl"]) and torch.equal(stream["G"], split["G"])
    for key in ("Aqk", "W", "U", "Qg", "Kd"):
        assert torch.isfinite(stream[key]).all(), key
        assert rel_err(stream[key], split[key]) < 1e-5, key


@pytest.mark.parametrize("diag", [(1, 1), (4, 1)])
def test_stream_akk_and_norms_equal_the_split_paths(pw, monkeypatch, diag):
    """The diagonal and off-diagonal launches write beta Akk on and below the chunk's diagonal
    blocks, exactly there (scratch starts as NaN: an entry left unwritten, or a zero right of the
    token missing, would show), equal to the split path's to fp32 rounding; RQ and RK are the
    rows' reciprocal norms; for one head per program and for four (two past H = 2)."""
    nan_empty = lambda *a, **kw: torch.full(a[0] if len(a) == 1 else a, float("nan"), **kw)  # noqa: E731
    lengths = [int(torch.randint(70, 100, ())), 13]
    x = kda_inputs(sum(lengths), H, 32, 16)
    cs, ce, _, NC = pw.chunk_table(random_cu_seqlens(lengths).tolist(), "cpu")
    args = [t.contiguous() for t in x.args()]
    tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
    tiles["fp32"]["diag"] = diag
    with monkeypatch.context() as m:
        m.setattr(pw, "STREAM_TILES", tiles)
        m.setattr(pw.torch, "empty", nan_empty)
        stream = pw.stream_local(*args, cs, ce, NC)
    split = pw.chunk_local(*args, cs, ce, NC)
    row = torch.arange(sum(lengths))
    col_block = torch.arange(pw.CHUNK) // 16
    start = torch.repeat_interleave(cs.long(), (ce - cs).long())  # each row's chunk start
    row_block = (row - start) // 16
    lower = (col_block[None, :] <= row_block[:, None])[:, None, :].expand(-1, H, -1)  # [T, H, BT]
    assert torch.equal(torch.isfinite(stream["Akk"]), lower)
    assert rel_err(stream["Akk"][lower], split["Akk"][lower]) < 1e-5
    assert rel_err(stream["RK"], 1 / torch.sqrt((x.k.float() ** 2).sum(-1) + 1e-6)) < 1e-6
    q_norm = torch.sqrt((x.q.float() ** 2).sum(-1) + 1e-6)
    assert rel_err(stream["RQ"], 32**-0.5 / q_norm) < 1e-6


def test_stream_approx_gate_is_the_exact_gate_to_fp32_rounding(pw, monkeypatch):
    """The prep tile's "approx" gate (the softplus's log by lg2.approx on the GPU, tl.log2 times
    ln 2 here) gives G within fp32 rounding of the exact gate's, and reaches the build (G differs
    in some last bits)."""
    lengths = [int(torch.randint(70, 130, ())), 9]
    x = kda_inputs(sum(lengths), H, 32, 16)
    cs, ce, _, NC = pw.chunk_table(random_cu_seqlens(lengths).tolist(), "cpu")
    args = [t.contiguous() for t in x.args()]
    G = {}
    for gate in ("exact", "approx"):
        tiles = {k: dict(v) for k, v in pw.STREAM_TILES.items()}
        tiles["fp32"]["prep"] = (16, 1, gate, "column")
        monkeypatch.setattr(pw, "STREAM_TILES", tiles)
        G[gate] = pw.stream_local(*args, cs, ce, NC)["G"]
    assert rel_err(G["approx"], G["exact"]) < 1e-6
    assert not torch.equal(G["approx"], G["exact"])


def test_stream_strong_decay_stays_finite(pw):
    """Every channel forgetting fast (decays far below fp32's range within a chunk): the decays
    through each block's first row stay <= 1, the output finite and on the reference."""
    err_o, err_s = _against_reference(
        pw, *_case([int(torch.randint(100, 140, ()))], 16, 16, [True], strong_decay=1.0)
    )
    assert err_o < 1e-4 and err_s < 1e-4


def test_stream_bf16_chunk_states(pw):
    """intra_chunk_dtype=bf16 (the carried state rounded at chunk boundaries): on the reference of
    that arm to a bf16-sized tolerance (a boundary value may round the other way)."""
    T = 64 + int(torch.randint(66, 120, ()))
    err_o, _ = _against_reference(pw, *_case([T], 16, 16, [True]), intra_chunk_dtype=torch.bfloat16)
    assert err_o < 1e-2


def test_stream_bf16_operands_are_the_production_form(pw):
    """dot_precision="bf16": bf16 operands (W, U, Aqk, Qg, Kd, v_new, the state in its products)
    put the output within bf16 reach of the fp32 reference, and measurably off it: the rounding
    is really there."""
    case = _case([int(torch.randint(100, 190, ())), 40], 32, 32, [True, False])
    pool = case[1].clone()
    err_fp32, _ = _against_reference(pw, *case)
    err_bf16, err_state = _against_reference(pw, case[0], pool, *case[2:], dot_precision="bf16")
    assert err_fp32 < 1e-4
    assert 1e-4 < err_bf16 < 5e-2 and err_state < 5e-2


def test_bf16_operands_only_in_the_stream_variant(pw):
    x, pool, slots, cu, init = _case([20], 16, 16, [True])
    with pytest.raises(KernelInputError, match="dot_precision"):
        pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="split", dot_precision="bf16")
    with pytest.raises(KernelInputError, match="dot_precision"):
        pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="stream", dot_precision="fp64")
    x, pool, slots, cu, init = _case([20], 192, 16, [True])  # its scan's stages need K <= 128
    with pytest.raises(KernelInputError, match="K up to 128"):
        pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="stream", dot_precision="bf16")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_stream_twin_passes_and_catches_truncation(pw, monkeypatch, dtype):
    """The fp32-twin check on stream launches: a 16-bit pool's stored state is exactly the fp32
    twin's, rounded; a truncating build of the same launch is caught."""
    lengths = [int(torch.randint(1, 70, ())), int(torch.randint(1, 20, ()))]
    x = kda_inputs(sum(lengths), H, 16, 32)
    args = (torch.tensor([3, 0], dtype=torch.int32), random_cu_seqlens(lengths), torch.tensor([True, False]))
    good = TwinChecker(raise_on_mismatch=True)
    good.kda_prefill(*x.args(), random_pool(4, H, 16, 32, dtype), *args)
    bad = TwinChecker(rounding="rtz")
    bad.kda_prefill(*x.args(), random_pool(4, H, 16, 32, dtype), *args)
    assert (good.checked, good.passed) == (1, 1) and (bad.checked, bad.passed) == (1, 0)
