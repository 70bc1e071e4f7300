"""The registered prefill variants (`kernels/kda_prefill/wrapper.PREFILL_VARIANTS`) in Triton's CPU
interpreter: "split", the numerics-floor alternative to the default "stream", against the float64
reference (packed batches with partial last chunks, initial states on and off, fast-forgetting
channels, bf16 chunk-boundary states), and how a variant is chosen by name.

Like tests/test_kernels_triton.py, the module re-runs itself under TRITON_INTERPRET=1."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import KernelInputError, reference
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


@pytest.mark.parametrize("init", [[True, False, True], [False, False, False]])
def test_split_matches_reference(pw, init):
    """Three sequences, partial last chunks (one of a single token), initial state on/off."""
    lengths = [int(torch.randint(65, 140, ())), 1, int(torch.randint(2, 64, ()))]
    x, pool, slots, cu, init = _case(lengths, 16, 32, init)
    pool_ref = pool.clone().double()
    out = torch.full((sum(lengths), H, 32), float("nan"))
    o = pw.kda_prefill(*x.args(), pool, slots, cu, init, out=out, variant="split")
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-4
    s = slots.long()
    assert rel_err(pool[s], pool_ref[s]) < 1e-4


def test_split_strong_decay_stays_finite(pw):
    """Every channel forgetting fast (decays far below fp32's range within a chunk)."""
    x, pool, slots, cu, init = _case([int(torch.randint(100, 140, ()))], 16, 16, [True], strong_decay=1.0)
    pool_ref = pool.clone().double()
    o = pw.kda_prefill(*x.args(), pool, slots, cu, init, variant="split")
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-4
    assert rel_err(pool[slots.long()], pool_ref[slots.long()]) < 1e-4


def test_variants_differ_only_in_the_last_bits(pw):
    """The same math summed in another order: close to each other (fp32 rounding), not bit-equal
    on a batch with several chunks (a floor worth measuring)."""
    lengths = [int(torch.randint(130, 190, ())), 64, 3]
    x, pool, slots, cu, init = _case(lengths, 16, 16, [True, False, True])
    pool_split = pool.clone()
    o_stream = pw.kda_prefill(*x.args(), pool, slots, cu, init)  # the default
    o_split = pw.kda_prefill(*x.args(), pool_split, slots, cu, init, variant="split")
    s = slots.long()
    assert rel_err(o_split, o_stream) < 1e-5 and rel_err(pool_split[s], pool[s]) < 1e-5
    assert not torch.equal(o_split, o_stream)


def test_variant_by_registered_name(pw):
    from evalkit.kernel_choice import PREFILL_VARIANTS

    assert set(pw.PREFILL_VARIANTS) == set(PREFILL_VARIANTS)  # what --kernels offers is what runs
    assert pw.resolve_variant(None) == pw.DEFAULT_VARIANT == "stream"
    assert pw.resolve_variant("split") == "split"
    for name in ("fused", "fast"):  # "fused" was deleted: refused like any unknown name
        with pytest.raises(KernelInputError, match="variant must be one of stream, split"):
            pw.resolve_variant(name)
