"""The Triton MLA prefill attention (`evalkit.kernels.mla_prefill`) in Triton's CPU interpreter:
against the float64 reference for fp32 / bf16 / fp16 inputs, an exact probe of the causal window,
bit-identical results for a sequence wherever its rows sit, and one-line errors for bad inputs.

Small tiles (16 x 16) at small sizes give several query tiles and key blocks, whole blocks before
the diagonal, blocks across it and lengths that are no multiple of a block. The interpreter must be
on before `triton` is first imported, so in a normal run `test_module_under_triton_interpreter`
re-runs this module in a fresh process with TRITON_INTERPRET=1, where the kernel tests execute."""

from __future__ import annotations

import pytest
import torch

from evalkit.errors import InputError
from evalkit.kernels import KernelInputError
from evalkit.kernels.mla_prefill.reference import mla_prefill_attention as reference
from tests.helpers.interpreter import interpreted_modules, rerun_under_interpreter
from tests.helpers.numerics import rel_err

test_module_under_triton_interpreter = rerun_under_interpreter(__file__)

SMALL_TILE = (16, 16, 4, 2)  # BLOCK_M, BLOCK_N, num_warps, num_stages
# (m, L): m = L, m < L, m = 1, lengths that are no multiple of 16, several query tiles; the last
# position of a tile on a block start (32, 48, 64 = 89 - 40 + 15), which a loop bound one key
# short would drop
SHAPES = [(33, 33), (5, 49), (1, 50), (40, 89)]
HEAD_DIMS = [(192, 128), (64, 64)]
# max |o - ref| / max |ref| allowed per input dtype: fp32 runs the fp32 path (ieee in the
# interpreter, tf32x3 on the GPU); 16-bit inputs round P to their dtype for the PV dot and round o.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


@pytest.fixture(scope="module")
def mla():
    mods = interpreted_modules(wrapper="evalkit.kernels.mla_prefill.wrapper")
    assert type(mods.wrapper.mla_prefill_kernel).__name__ == "InterpretedFunction"
    return mods.wrapper


def random_qkv(H, m, L, dqk, dv, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(H, m, dqk, generator=g), torch.randn(H, L, dqk, generator=g)
    v = torch.randn(H, L, dv, generator=g)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def shifted_reference(q, k, v, scale):
    """The reference with the causal diagonal one key short (a query at position p > 0 sees keys
    0..p-1): what a mask off by one computes (one key too far changes nothing for the last query)."""
    m, L = q.shape[1], k.shape[1]
    s = torch.einsum("hmd,hld->hml", q.double(), k.double()) * scale
    sees = torch.arange(L)[None, :] <= (torch.arange(L - m, L)[:, None] - 1).clamp_min(0)
    s = s.masked_fill(~sees, float("-inf"))
    return torch.einsum("hml,hlv->hmv", s.softmax(-1), v.double())


def nan_out(H, m, dv, dtype):
    return torch.full((H, m, dv), float("nan"), dtype=dtype)


@pytest.mark.parametrize("dqk,dv", HEAD_DIMS)
@pytest.mark.parametrize("m,L", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_matches_float64_reference(mla, dtype, m, L, dqk, dv):
    H = 2
    q, k, v = random_qkv(H, m, L, dqk, dv, dtype, seed=m * 1000 + L)
    scale = dqk**-0.5
    o = mla.mla_prefill_attention(q, k, v, scale, out=nan_out(H, m, dv, dtype), tile=SMALL_TILE)
    assert o.dtype == dtype and o.shape == (H, m, dv)
    ref = reference(q, k, v, scale)
    tol = TOLERANCE[dtype]
    assert rel_err(o, ref) < tol
    if dtype == torch.float32:  # the tolerance would catch a diagonal one key off
        assert rel_err(shifted_reference(q, k, v, scale), ref) > 10 * tol


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_default_tiles_match_reference(mla, dtype):
    """The launch shapes of the GPU (TILES: 128 x 64 for 16-bit inputs, 64 x 16 for fp32)."""
    H, m, L, dqk, dv = 2, 150, 211, 192, 128
    q, k, v = random_qkv(H, m, L, dqk, dv, dtype, seed=7)
    o = mla.mla_prefill_attention(q, k, v, dqk**-0.5, out=nan_out(H, m, dv, dtype))
    assert rel_err(o, reference(q, k, v, dqk**-0.5)) < TOLERANCE[dtype]


@pytest.mark.parametrize("dqk,dv", [(192, 128), (24, 40), (200, 72)])
@pytest.mark.parametrize("m,L", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_causal_window_exactly(mla, dtype, m, L, dqk, dv):
    """Every key has the same k row, so each query weighs the keys it sees equally, and v[key] =
    +-key: query i (position L - m + i) must return exactly +-(L - m + i) / 2, in every dtype (the
    values are exact in bf16). A window one key too wide or too narrow is off by 1/2."""
    H = 2
    g = torch.Generator().manual_seed(1)
    q = torch.randn(H, m, dqk, generator=g).to(dtype)
    k = torch.randn(H, 1, dqk, generator=g).expand(H, L, dqk).to(dtype).contiguous()
    sign = torch.tensor([1.0, -1.0]).repeat(dv)[:dv]
    v = (torch.arange(L, dtype=torch.float32)[:, None] * sign).expand(H, L, dv).to(dtype).contiguous()
    o = mla.mla_prefill_attention(q, k, v, dqk**-0.5, out=nan_out(H, m, dv, dtype), tile=SMALL_TILE)
    expected = (torch.arange(L - m, L, dtype=torch.float32)[:, None] / 2 * sign).expand(H, m, dv)
    assert torch.equal(o.float(), expected)


def test_fp32_ieee_dots_match_too(mla):
    q, k, v = random_qkv(2, 9, 40, 192, 128, torch.float32)
    o = mla.mla_prefill_attention(q, k, v, 0.1, tile=SMALL_TILE, dot_precision="ieee")
    assert rel_err(o, reference(q, k, v, 0.1)) < 1e-5


# ----------------------------------------------------------------- a sequence's result is its own


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sequence_alone_equals_sequence_among_others(mla, dtype):
    """The engine hands the kernel views into packed [tokens, heads, dim] tensors, with other
    sequences' rows around them. Rows after the sequence's keys are NaN (reading one would show);
    the result is bit-identical to the same sequence in its own contiguous tensors, to each head
    computed alone, and to a second call."""
    H, m, L, dqk, dv = 3, 21, 45, 192, 128
    q, k, v = random_qkv(H, m, L, dqk, dv, dtype, seed=3)
    alone = mla.mla_prefill_attention(q, k, v, 0.07, tile=SMALL_TILE)

    g = torch.Generator().manual_seed(4)
    q_packed = torch.randn(m + 30, H, dqk, generator=g).to(dtype)  # other sequences' queries around
    q_packed[11 : 11 + m] = q.transpose(0, 1)
    kv = torch.full((L + 17, H, dqk + dv), float("nan"), dtype=dtype)  # like kv_b_proj's [L, H, nope+v]
    kv[:L, :, :dqk], kv[:L, :, dqk:] = k.transpose(0, 1), v.transpose(0, 1)
    qs = q_packed[11 : 11 + m].transpose(0, 1)
    ks, vs = kv[:L, :, :dqk].transpose(0, 1), kv[:L, :, dqk:].transpose(0, 1)
    assert not qs.is_contiguous() and not vs.is_contiguous()
    among = mla.mla_prefill_attention(qs, ks, vs, 0.07, tile=SMALL_TILE)
    assert torch.equal(among, alone)
    assert torch.equal(mla.mla_prefill_attention(q, k, v, 0.07, tile=SMALL_TILE), alone)
    for h in range(H):
        one = mla.mla_prefill_attention(q[h : h + 1], k[h : h + 1], v[h : h + 1], 0.07, tile=SMALL_TILE)
        assert torch.equal(one[0], alone[h])


# ------------------------------------------------------------------ through the model's entry point


def test_triton_mode_runs_the_kernel(mla):
    from evalkit.model.layers import mla_prefill

    q, k, v = random_qkv(2, 6, 30, 192, 128, torch.float32)
    assert mla_prefill.triton_eligible(q, "triton")
    o = mla_prefill.causal_prefill_attention(q, k, v, 0.1, mode="triton")
    assert torch.equal(o, mla.mla_prefill_attention(q, k, v, 0.1))
    assert rel_err(o, reference(q, k, v, 0.1)) < 1e-5


def test_triton_mode_without_triton_runs_sdpa(monkeypatch):
    """On CPU without the interpreter the mode falls back to SDPA's plain form."""
    from evalkit.model.layers import mla_prefill

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, k, v = random_qkv(2, 6, 30, 24, 16, torch.float32)
    assert not mla_prefill.triton_eligible(q, "triton")
    o = mla_prefill.causal_prefill_attention(q, k, v, 0.1, mode="triton")
    assert rel_err(o, reference(q, k, v, 0.1)) < 1e-5


def test_auto_mode_takes_the_kernel_for_16bit_cuda_only():
    """The default: the Triton kernel for 16-bit CUDA tensors (2.43 s against SDPA flash's 4.66 s
    for 7 layers of a 128k prompt), SDPA for fp32 (where the kernel was 0.58x SDPA) and on the CPU."""
    from types import SimpleNamespace

    from evalkit.model.layers import mla_prefill

    for dtype, on_cuda, chosen in [
        (torch.bfloat16, True, True),
        (torch.float16, True, True),
        (torch.float32, True, False),
        (torch.bfloat16, False, False),
    ]:
        q = SimpleNamespace(is_cuda=on_cuda, dtype=dtype)  # the choice reads only these
        assert mla_prefill.triton_eligible(q, "auto") is chosen, (dtype, on_cuda)
        assert not mla_prefill.flash_eligible(q, 192, "auto")  # the padded flash route only when asked for
    q, k, v = random_qkv(2, 6, 30, 24, 16, torch.float32)
    assert rel_err(mla_prefill.causal_prefill_attention(q, k, v, 0.1), reference(q, k, v, 0.1)) < 1e-5


def test_unknown_mode_is_refused():
    from evalkit.kernel_choice import parse_kernels
    from evalkit.model.layers import mla_prefill

    q, k, v = random_qkv(1, 2, 3, 16, 16, torch.float32)
    with pytest.raises(InputError, match="is none of auto, triton, flash, sdpa"):
        mla_prefill.causal_prefill_attention(q, k, v, 0.1, mode="fast")
    with pytest.raises(InputError, match="mla_prefill must be one of"):
        parse_kernels("mla_prefill=fast")


# ------------------------------------------------------------------------------------- bad inputs


def _bad_calls():
    f32, bf16 = torch.float32, torch.bfloat16
    q, k, v = random_qkv(2, 4, 9, 192, 128, f32)
    return {
        "q rank": ((q[0], k, v), "q must be 3-D"),
        "v rank": ((q, k, v[None]), "v must be 3-D"),
        "m > L": ((torch.zeros(2, 10, 192), k, v), "10 queries but only 9 keys"),
        "dqk > 256": ((torch.zeros(2, 4, 320), torch.zeros(2, 9, 320), v), "dqk=320"),
        "dv > 256": ((q, k, torch.zeros(2, 9, 300)), "dv=300"),
        "heads differ": ((q, k[:1], v[:1]), "shapes do not fit"),
        "k and v lengths differ": ((q, k, v[:, :8]), "shapes do not fit"),
        "dtypes differ": ((q, k.to(bf16), v), "share one dtype"),
        "float64": ((q.double(), k.double(), v.double()), "share one dtype"),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_inputs_raise_one_clear_line(case):
    from evalkit.kernels.mla_prefill.wrapper import mla_prefill_attention

    args, says = _bad_calls()[case]
    with pytest.raises(KernelInputError) as err:
        mla_prefill_attention(*args, 0.1)
    assert says in str(err.value) and "\n" not in str(err.value)
