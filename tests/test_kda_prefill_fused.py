"""The fused chunk-local prefill kernel (variant "fused", kernels/kda_prefill/fused.py) in Triton's CPU
interpreter: against the float64 reference (the split path's tolerance), against the split path
(its W, U, Aqk to fp32 rounding), on packed batches with partial last chunks, with and without
initial states, with bf16 chunk-boundary states; and how the variant is chosen.

Like tests/test_kernels_triton.py, the module re-runs itself under TRITON_INTERPRET=1."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import KernelInputError, reference
from evalkit.kernels.testing import kda_inputs, random_cu_seqlens
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


def _nan_out(T, V):
    return torch.full((T, H, V), float("nan"))


@pytest.mark.parametrize("init", [[True, False, True], [False, False, False]])
def test_fused_matches_reference(pw, init):
    """Three sequences, partial last chunks (one of a single token), initial state on/off."""
    lengths = [int(torch.randint(65, 140, ())), 1, int(torch.randint(2, 64, ()))]
    x, pool, slots, cu, init = _case(lengths, 16, 32, init)
    pool_ref = pool.clone().double()
    o = pw.kda_prefill(*x.args(), pool, slots, cu, init, out=_nan_out(sum(lengths), 32), variant="fused")
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-4
    s = slots.long()
    assert rel_err(pool[s], pool_ref[s]) < 1e-4


def test_fused_chunk_local_equals_split(pw, monkeypatch):
    """W, U, Aqk of the two variants agree to fp32 rounding (the same math, the solve ordered
    differently); Aqk rows past a chunk's end are zero in both. The scratch buffers start as NaN,
    so a row the fused kernel reads back before writing it would show. BKC = 16 and BKD = 4 < K: the column
    loops run more than once."""
    monkeypatch.setattr(pw, "FUSED_TILE", (16, 4, 4, 1))
    nan_empty = lambda *a, **kw: torch.full(a[0] if len(a) == 1 else a, float("nan"), **kw)  # noqa: E731
    lengths = [int(torch.randint(130, 192, ())), 17, int(torch.randint(33, 64, ()))]
    x = kda_inputs(sum(lengths), H, 32, 48)
    cs, ce, _, NC = pw.chunk_table(random_cu_seqlens(lengths).tolist(), "cpu")
    args = [t.contiguous() for t in x.args()]
    with monkeypatch.context() as m:
        m.setattr(pw.torch, "empty", nan_empty)
        split = pw.chunk_local(*args, cs, ce, NC, variant="split")
        fused = pw.chunk_local(*args, cs, ce, NC, variant="fused")
    assert "Akk" not in fused
    for key in ("G", "Qg", "Kd", "EGl"):  # kernel 1 is shared
        assert torch.equal(split[key], fused[key]), key
    for key in ("Aqk", "W", "U"):
        assert torch.isfinite(fused[key]).all(), key
        assert rel_err(fused[key], split[key]) < 1e-5, key


def test_fused_end_to_end_equals_split(pw):
    """Outputs and stored states of the two variants, four sequences (one of exactly one chunk)."""
    lengths = [int(torch.randint(70, 130, ())), 64, 3, int(torch.randint(20, 60, ()))]
    x, pool, slots, cu, init = _case(lengths, 16, 16, [True, False, True, False])
    pool_f = pool.clone()
    o_s = pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="split")
    o_f = pw.kda_prefill(*x.args(), pool_f, slots, cu, init, variant="fused")
    s = slots.long()
    assert rel_err(o_f, o_s) < 1e-5 and rel_err(pool_f[s], pool[s]) < 1e-5


def test_fused_strong_decay_stays_finite(pw):
    """Every channel forgetting fast (decays far below fp32's range within a chunk): the gate
    safeguards keep the fused kernel finite and on the reference."""
    lengths = [int(torch.randint(100, 140, ()))]
    x, pool, slots, cu, init = _case(lengths, 16, 16, [True], strong_decay=1.0)
    pool_ref = pool.clone().double()
    o = pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="fused")
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-4
    assert rel_err(pool[slots.long()], pool_ref[slots.long()]) < 1e-4


def test_fused_bf16_chunk_states(pw):
    """intra_chunk_dtype=bf16 (the state rounded at chunk boundaries, in the shared state pass):
    close to the split path and to the reference of that arm (a boundary value may round the other
    way, hence the bf16-sized tolerance, as in the split path's test)."""
    T = 64 + int(torch.randint(66, 120, ()))
    x, pool, slots, cu, init = _case([T], 16, 16, [True])
    pool_s, pool_ref = pool.clone(), pool.clone().double()
    kw = dict(intra_chunk_dtype=torch.bfloat16)
    o_f = pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="fused", **kw)
    o_s = pw.kda_prefill(*x.args(), pool_s, slots, cu, init, variant="split", **kw)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init, **kw)
    assert rel_err(o_f, o_s) < 1e-2 and rel_err(o_f, o_ref) < 1e-2


def test_variant_from_keyword_then_environment(pw, monkeypatch):
    monkeypatch.delenv(pw.VARIANT_ENV, raising=False)
    assert pw.resolve_variant(None) == "stream"
    monkeypatch.setenv(pw.VARIANT_ENV, "fused")
    assert pw.resolve_variant(None) == "fused"
    assert pw.resolve_variant("split") == "split"  # the keyword wins
    monkeypatch.setenv(pw.VARIANT_ENV, "fast")
    with pytest.raises(KernelInputError, match="EVALKIT_KDA_PREFILL"):
        pw.resolve_variant(None)
    with pytest.raises(KernelInputError, match="variant"):
        pw.resolve_variant("fast")


def test_environment_selects_fused_in_the_wrapper(pw, monkeypatch):
    """EVALKIT_KDA_PREFILL=fused with no keyword runs exactly the fused path."""
    x, pool, slots, cu, init = _case([70], 16, 16, [True])
    pool_env = pool.clone()
    monkeypatch.setenv(pw.VARIANT_ENV, "fused")
    o_env = pw.kda_prefill(*x.args(), pool_env, slots, cu, init)
    o_kw = pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="fused")
    assert torch.equal(o_env, o_kw) and torch.equal(pool_env, pool)
