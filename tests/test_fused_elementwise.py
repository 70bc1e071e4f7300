"""The fused elementwise ops of the model layers (evalkit.kernels.rms_norm, evalkit.kernels.swiglu)
against the plain torch forms they replace and their float64 references: the Triton kernels in
Triton's CPU interpreter (a re-run of this module with TRITON_INTERPRET=1); the layers' switch."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import cpu, reference
from tests.helpers.interpreter import INTERPRETING, interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err
from tests.helpers.tiny_kimi import tiny_moe_layer

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def rows(n, d, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(n, d, generator=g)).to(dtype)


@pytest.fixture(scope="module")
def tk():
    return interpreted_modules(rn="evalkit.kernels.rms_norm.wrapper", sw="evalkit.kernels.swiglu.wrapper")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [300, 64, 2304])
def test_triton_rms_norm_matches_the_torch_form(tk, dtype, D):
    x = rows(37, D, dtype)
    w = (1 + 0.1 * rows(1, D, torch.float32, seed=1)[0]).to(dtype)
    out, torch_form = tk.rn.rms_norm(x, w, 1e-5), cpu.rms_norm(x, w, 1e-5)
    assert out.dtype == torch_form.dtype and out.shape == x.shape
    if dtype == torch.float32:  # only the sum of squares' order differs: the last bit
        assert rel_err(out, torch_form) < 1e-6
    else:  # the same roundings: equal unless the fp32 sum lands on a rounding boundary
        assert (out != torch_form).float().mean() < 0.01
    assert rel_err(out, reference.rms_norm(x, w, 1e-5)) < (1e-6 if dtype == torch.float32 else 1e-2)
    alone = tk.rn.rms_norm(x[5:6], w, 1e-5)  # batch invariance: a row alone equals it among others
    assert torch.equal(alone[0], out[5])


def test_triton_rms_norm_takes_strided_rows_and_an_fp32_weight(tk):
    base = rows(37, 500, torch.bfloat16)
    x = base[:, 100:400]  # rows of a wider tensor, as MLA's latent slice
    w = 1 + 0.1 * rows(1, 300, torch.float32, seed=1)[0]
    out = tk.rn.rms_norm(x, w, 1e-6)
    assert out.dtype == torch.float32  # weight * h.to(bf16) promotes, as in torch
    assert torch.equal(out, cpu.rms_norm(x, w, 1e-6)) or rel_err(out, cpu.rms_norm(x, w, 1e-6)) < 1e-6


@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_swiglu_matches_the_torch_form(tk, dtype):
    gu = rows(37, 2 * 300, dtype)
    out, torch_form = tk.sw.swiglu(gu), cpu.swiglu(gu)
    assert out.shape == (37, 300) and out.dtype == dtype
    if dtype == torch.float32:  # exp: numpy's here, torch's own on the CPU
        assert rel_err(out, torch_form) < 1e-6
    else:
        assert (out != torch_form).float().mean() < 0.01
    assert rel_err(out, reference.swiglu(gu)) < (1e-6 if dtype == torch.float32 else 1e-2)
    strided = rows(37, 700, dtype, seed=2)[:, 50:650]
    assert rel_err(tk.sw.swiglu(strided), cpu.swiglu(strided)) < (1e-6 if dtype == torch.float32 else 1e-2)


def test_triton_ops_reject_bad_shapes(tk):
    from evalkit.kernels import KernelInputError

    with pytest.raises(KernelInputError, match="weight must be"):
        tk.rn.rms_norm(rows(3, 8, torch.float32), torch.ones(7), 1e-5)
    with pytest.raises(KernelInputError, match="even"):
        tk.sw.swiglu(rows(3, 7, torch.float32))


def test_torch_forms_match_their_references_and_a_wrong_form_is_caught():
    x = rows(37, 300, torch.float32)
    w = 1 + 0.1 * rows(1, 300, torch.float32, seed=1)[0]
    assert rel_err(cpu.rms_norm(x, w, 1e-5), reference.rms_norm(x, w, 1e-5)) < 1e-6
    assert rel_err(cpu.rms_norm(x, w, 1e-5), reference.rms_norm(x, w * 0 + 1, 1e-5)) > 1e-2
    gu = rows(37, 600, torch.float32)
    assert rel_err(cpu.swiglu(gu), reference.swiglu(gu)) < 1e-6
    assert rel_err(cpu.swiglu(gu), reference.swiglu(gu.flip(-1))) > 1e-1  # g and u swapped


def test_layers_fused_forms_equal_their_torch_forms(tk):
    """The MoE layer (RMSNorm is the caller's) and a decoder layer's norm on the GPU path
    (interpreted): fused kernels against `KernelChoice(fused_elementwise=False)`, in fp32 and bf16."""
    from evalkit.kernel_choice import KernelChoice
    from evalkit.model.layers import fused
    from evalkit.model.layers.norm import rms_norm

    layer = tiny_moe_layer()
    x = torch.randn(23, 32, generator=torch.Generator().manual_seed(1))
    w = 1 + 0.1 * torch.randn(32, generator=torch.Generator().manual_seed(2))
    layer.kernels = layer.shared.kernels = KernelChoice(fused_elementwise=False)
    a, na = layer(x, n_routed=20), rms_norm(x, w, 1e-5, fused=False)
    layer.kernels = layer.shared.kernels = KernelChoice()
    b, nb = layer(x, n_routed=20), rms_norm(x, w, 1e-5, fused=True)
    assert rel_err(b, a) < 1e-6 and rel_err(nb, na) < 1e-6
    xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
    assert (rms_norm(xb, wb, 1e-5) != cpu.rms_norm(xb, wb, 1e-5)).float().mean() < 0.01
    assert not fused.fused_elementwise(x, False)


def test_fused_switch_rejects_a_bad_value():
    from evalkit.errors import InputError
    from evalkit.kernel_choice import parse_kernels
    from evalkit.model.layers import fused

    with pytest.raises(InputError, match="fused_elementwise must be on or off"):
        parse_kernels("fused_elementwise=yes")
    assert fused.fused_elementwise(torch.zeros(1), True) == INTERPRETING  # CPU tensors: only interpreted
