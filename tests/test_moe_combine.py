"""The MoE combine op (evalkit.kernels.moe_combine) against its float64 reference: the Triton kernel
in Triton's CPU interpreter (re-run of this module with TRITON_INTERPRET=1), the CPU implementation
and the naive form here; and the MoE layer's fused combine against its torch combine."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import reference
from tests.helpers.interpreter import interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err
from tests.helpers.tiny_kimi import tiny_moe_layer

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)


def case(n=37, k=8, D=300, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    ys = torch.randn(n * k, D, generator=g).to(dtype)
    inv = torch.randperm(n * k, generator=g).view(n, k)
    w = torch.rand(n, k, generator=g)
    return ys, inv, w


@pytest.fixture(scope="module")
def tk():
    return interpreted_modules(combine="evalkit.kernels.moe_combine.wrapper")


@pytest.mark.parametrize("D", [300, 256, 17])
def test_triton_combine_matches_reference(tk, D):
    ys, inv, w = case(D=D)
    out = tk.combine.moe_combine(ys, inv, w, torch.float32)
    assert out.shape == (37, D) and torch.isfinite(out).all()
    assert rel_err(out, reference.moe_combine(ys, inv, w, None)) < 1e-6
    # a row's sum does not depend on the other rows (batch invariance)
    alone = tk.combine.moe_combine(ys, inv[5:6], w[5:6], torch.float32)
    assert torch.equal(alone[0], out[5])


def test_triton_combine_rejects_mismatched_shapes(tk):
    from evalkit.kernels import KernelInputError

    ys, inv, w = case()
    with pytest.raises(KernelInputError, match="alike"):
        tk.combine.moe_combine(ys, inv, w[:, :3], torch.float32)


def test_cpu_and_naive_forms_match_reference():
    from evalkit.kernels import cpu
    from evalkit.kernels.moe_combine.naive import naive_moe_combine

    ys, inv, w = case(dtype=torch.float32)
    ref = reference.moe_combine(ys, inv, w, None)
    assert rel_err(cpu.moe_combine(ys, inv, w, torch.float32), ref) < 1e-6
    assert rel_err(naive_moe_combine(ys, inv, w, torch.float32), ref) < 1e-6
    # a wrong inverse permutation is caught by the comparison
    assert rel_err(cpu.moe_combine(ys, inv.roll(1, 0), w, torch.float32), ref) > 1e-2


def test_moe_layer_fused_combine_equals_torch_combine(tk):
    """The layer on the GPU path (interpreted): fused combine vs the torch scatter + fp32 sum."""
    from evalkit.errors import InputError
    from evalkit.kernel_choice import KernelChoice

    layer = tiny_moe_layer()
    x = torch.randn(23, 32, generator=torch.Generator().manual_seed(1))
    layer.kernels = KernelChoice(moe_combine="torch")
    a = layer(x, n_routed=20)
    layer.kernels = KernelChoice(moe_combine="fused")
    b = layer(x, n_routed=20)
    assert rel_err(b, a) < 1e-6 and torch.equal(b[20:], a[20:])  # padding rows: the shared expert only
    with pytest.raises(InputError, match="moe_combine must be one of fused, torch"):
        KernelChoice(moe_combine="bogus")
