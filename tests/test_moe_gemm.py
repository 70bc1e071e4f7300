"""The MoE grouped GEMM (evalkit.kernels.moe_gemm) against its float64 reference: the Triton kernel
in Triton's CPU interpreter (re-run of this module with TRITON_INTERPRET=1), the CPU implementation
here; a row's result alone and in a batch, under two tiles; and the MoE layer's decode step with
`moe_decode=triton` against torch's grouped GEMM."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import reference
from tests.helpers.interpreter import INTERPRETING, interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err
from tests.helpers.tiny_kimi import tiny_moe_layer

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)
# rows per expert: empty experts, one row, and more rows than the default 32-row block (two blocks)
COUNTS = [3, 0, 37, 1, 0, 9]


def case(N=40, K=72, dtype=torch.bfloat16, counts=COUNTS, seed=0):
    g = torch.Generator().manual_seed(seed)
    offs = torch.cumsum(torch.tensor(counts), 0).to(torch.int32)
    x = torch.randn(int(offs[-1]), K, generator=g).to(dtype)
    w = torch.randn(len(counts), N, K, generator=g).to(dtype)
    return x, w, offs


@pytest.fixture(scope="module")
def tk():
    return interpreted_modules(gemm="evalkit.kernels.moe_gemm.wrapper")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("N, K", [(40, 72), (128, 256)])  # ragged edges; whole tiles (the model's dims)
def test_triton_gemm_matches_reference(tk, dtype, N, K):
    """fp32 sums of exact products: within the rounding of the output to its dtype plus the fp32
    sum's own error bound (K units of fp32 rounding times the sum of |products|)."""
    x, w, offs = case(N=N, K=K, dtype=dtype)
    y = tk.gemm.moe_gemm(x, w, offs)
    ref = reference.moe_gemm(x, w, offs)
    assert y.dtype == dtype and y.shape == (x.shape[0], w.shape[1])
    ulp = {torch.float32: 2.0**-23, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]
    sum_bound = K * 2.0**-24 * reference.moe_gemm(x.abs(), w.abs(), offs)
    assert ((y.double() - ref).abs() <= ref.abs() * ulp + sum_bound).all()
    # each expert's rows use its own weights: a shifted offs is caught
    wrong = tk.gemm.moe_gemm(x, w, torch.roll(offs, 1).clamp_max(int(offs[-1])))
    assert rel_err(wrong, ref) > 1e-1


def test_triton_gemm_row_does_not_depend_on_the_batch_or_the_tile(tk):
    """A row alone equals the row in its expert's batch, whichever row block it fell in, and the
    row block's height (BM) does not change it: what the engine's batch invariance needs."""
    x, w, offs = case(dtype=torch.bfloat16)
    y = tk.gemm.moe_gemm(x, w, offs)
    assert tk.gemm.DEFAULT_TILE.BM == 32  # expert 2's 37 rows: two blocks of 32, three of 16
    short = tk.gemm.moe_gemm(x, w, offs, tk.gemm.MoeTile(BM=16, BN=32, BK=128))
    assert torch.equal(short, y)
    for row, expert in ((0, 0), (3 + 20, 2), (3 + 36, 2), (int(offs[-1]) - 1, 5)):
        one = torch.tensor([1], dtype=torch.int32)
        alone = tk.gemm.moe_gemm(x[row : row + 1], w[expert : expert + 1], one)
        assert torch.equal(alone[0], y[row]), row


class PoisonedTorch:
    """torch, but `empty` hands out NaN: what an output's memory can hold before a kernel writes it."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def empty(*shape, dtype, device):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)


def test_triton_gemm_writes_zeros_past_the_last_expert(tk, monkeypatch):
    """Rows past offs[-1] (a decode step's dummy rows, routed to no expert) come back as zeros, not
    as whatever the output's memory held; the routed rows are those of the call without them."""
    x, w, offs = case(dtype=torch.bfloat16)
    y = tk.gemm.moe_gemm(x, w, offs)
    extra = torch.cat([x, torch.randn(40, x.shape[1]).to(x.dtype)])  # more than one 32-row block
    monkeypatch.setattr(tk.gemm, "torch", PoisonedTorch())
    y_extra = tk.gemm.moe_gemm(extra, w, offs)
    assert torch.equal(y_extra[: len(x)], y)
    assert torch.equal(y_extra[len(x) :], torch.zeros(40, w.shape[1], dtype=x.dtype))


def test_triton_gemm_rejects_bad_inputs(tk):
    from evalkit.kernels import KernelInputError

    x, w, offs = case()
    with pytest.raises(KernelInputError, match="offs must be int32"):
        tk.gemm.moe_gemm(x, w, offs.long())
    with pytest.raises(KernelInputError, match=r"x \[R, K\] and w \[E, N, K\]"):
        tk.gemm.moe_gemm(x[:, :10], w, offs)
    with pytest.raises(KernelInputError, match="share a dtype"):
        tk.gemm.moe_gemm(x.float(), w, offs)


def test_cpu_form_matches_reference():
    from evalkit.kernels import cpu

    x, w, offs = case(dtype=torch.float32)
    ref = reference.moe_gemm(x, w, offs)
    assert rel_err(cpu.moe_gemm(x, w, offs), ref) < 1e-6
    assert rel_err(cpu.moe_gemm(x, w.flip(0), offs), ref) > 1e-1
    extra = torch.cat([x, torch.ones(3, x.shape[1])])
    assert torch.equal(cpu.moe_gemm(extra, w, offs)[len(x) :], torch.zeros(3, w.shape[1]))


def test_moe_layer_decode_with_triton_gemm_matches_grouped_mm(tk):
    """The layer on the GPU path (interpreted), a decode step: the Triton GEMM against torch's
    grouped GEMM (fp32 weights: IEEE products in both), and the prefill path left on torch's."""
    from evalkit.kernel_choice import KernelChoice

    layer = tiny_moe_layer()
    x = torch.randn(23, 32, generator=torch.Generator().manual_seed(1))
    calls = []
    real = tk.gemm.moe_gemm
    layer.kernels = KernelChoice(moe_decode="grouped_mm")
    a = layer(x, decode=True)
    layer.kernels = KernelChoice(moe_decode="triton")
    try:
        tk.gemm.moe_gemm = lambda *args, **kw: calls.append(1) or real(*args, **kw)
        b = layer(x, decode=True)
        assert len(calls) == 2  # gate/up and down
        prefill = layer(x, n_routed=20)
        assert len(calls) == 2  # a prefill keeps torch's grouped GEMM
    finally:
        tk.gemm.moe_gemm = real
    assert rel_err(b, a) < 1e-6
    assert torch.equal(prefill, layer(x, n_routed=20))


@pytest.mark.parametrize("choice", ["triton", "grouped_mm"])
@pytest.mark.parametrize("combine", ["fused", "torch"])
def test_moe_layer_routes_a_decode_steps_dummy_rows_to_no_expert(tk, choice, combine):
    """`real_rows`: the dummy rows reach no expert's GEMM (they get the shared expert alone) and the
    real rows' outputs are those of the step without the mask, bit for bit."""
    from evalkit.kernel_choice import KernelChoice

    layer = tiny_moe_layer()
    layer.kernels = KernelChoice(moe_decode=choice, moe_combine=combine)
    x = torch.randn(23, 32, generator=torch.Generator().manual_seed(2))
    real = torch.arange(23) < 17
    full = layer(x, decode=True)
    routed_rows, real_gemm, real_grouped = [], tk.gemm.moe_gemm, torch._grouped_mm
    spy = lambda offs: routed_rows.append(int(offs[-1]))  # noqa: E731
    try:
        tk.gemm.moe_gemm = lambda xs, w, offs, *a: spy(offs) or real_gemm(xs, w, offs, *a)
        torch._grouped_mm = lambda xs, w, offs: spy(offs) or real_grouped(xs, w, offs=offs)
        masked = layer(x, decode=True, real_rows=real)
    finally:
        tk.gemm.moe_gemm, torch._grouped_mm = real_gemm, real_grouped
    assert routed_rows == [17 * layer.top_k] * 2  # both projections: the real rows' pairs alone
    assert torch.equal(masked[:17], full[:17])
    assert torch.equal(masked[17:], layer.shared(x)[17:])


def test_engine_decode_with_torchs_grouped_gemm_gives_the_cpu_paths_tokens(tiny_hybrid_ckpt):
    """The engine on the interpreted GPU path with `moe_decode=grouped_mm` (the default, the Triton
    GEMM, is test_engine_gpu_paths'): the CPU path's tokens, logits within fp32 sums' reordering."""
    if INTERPRETING:
        pytest.skip("starts its own interpreted process")
    from tests.helpers.gpu_paths import run_engine

    cpu = run_engine(tiny_hybrid_ckpt, "cpu", 40, 4)
    tri = run_engine(tiny_hybrid_ckpt, "triton", 40, 4, "moe_decode=grouped_mm")
    assert tri["tokens"] == cpu["tokens"]
    a, b = torch.tensor(cpu["logits"]), torch.tensor(tri["logits"])
    assert (a - b).abs().max() <= 1e-4 * a.abs().max()


@pytest.mark.parametrize("E", [256, 40000])  # int16 keys; past int16's range, int32 keys
def test_expert_order_is_the_stable_order_by_expert(E):
    """The rows' order by expert id, ties in row order: Python's stable sort is the oracle."""
    from evalkit.model.layers.moe import expert_order

    g = torch.Generator().manual_seed(E)
    flat = torch.randint(0, E + 1, (4096,), generator=g)
    flat[:64] = E  # the virtual expert (a decode step's dummy rows), and many ties
    want = sorted(range(flat.numel()), key=lambda i: int(flat[i]))
    assert expert_order(flat, E).tolist() == want
