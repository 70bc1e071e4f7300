"""Triton kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1) against the float64 reference.

Fresh random inputs each run; outputs are poisoned with NaN before each launch so an element the
kernel forgets to write fails; pool rows of new sequences are NaN so reading them fails.
TRITON_INTERPRET is set only for this module (Triton reads it when the kernel modules are first
imported, and our dispatcher reads it at call time)."""

from __future__ import annotations

import importlib
import types

import pytest
import torch

from evalkit.kernels import STATE_DTYPES, KernelInputError, reference
from evalkit.kernels.kda_prefill.naive import naive_chunked_kda
from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool

H = 2


@pytest.fixture(scope="module")
def tk():
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_INTERPRET", "1")
    mods = types.SimpleNamespace(
        decode=importlib.import_module("evalkit.kernels.kda_decode.wrapper"),
        prefill=importlib.import_module("evalkit.kernels.kda_prefill.wrapper"),
        conv=importlib.import_module("evalkit.kernels.short_conv.wrapper"),
        norm=importlib.import_module("evalkit.kernels.gated_rmsnorm.wrapper"),
    )
    if type(mods.decode.kda_decode_kernel).__name__ != "InterpretedFunction":
        pytest.skip("Triton kernels were imported for the GPU earlier in this process")
    yield mods
    mp.undo()


def rel_err(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> int:
    ia, ib = a.view(torch.int16).int(), b.view(torch.int16).int()
    ia = torch.where(ia < 0, -(ia & 0x7FFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFF), ib)
    return int((ia - ib).abs().max())


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
    else:  # reference rounded the same way (float64 -> 16-bit once; the kernel fp32 -> 16-bit)
        assert ulps_apart(pool[touched], pool_ref[touched].to(dt)) <= 1
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
        assert ulps_apart(pool[touched], pool_ref[touched].to(dt)) <= 1


def test_prefill_intra_chunk_bf16_matches_reference(tk):
    lengths = [int(torch.randint(129, 150, ()))]  # two chunk boundaries
    x, pool, slots, cu, init = _prefill_case(lengths, 16, 16, torch.float32, [True])
    pool_ref = pool.clone().double()
    pool_fp32 = pool.clone()
    o = tk.prefill.kda_prefill(*x.args(), pool, slots, cu, init, intra_chunk_dtype=torch.bfloat16)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, slots, cu, init, intra_chunk_dtype=torch.bfloat16)
    o32 = tk.prefill.kda_prefill(*x.args(), pool_fp32, slots, cu, init)
    err = rel_err(o, o_ref)
    assert err < 2e-3  # only double-rounding (float64 vs fp32 -> bf16) separates them
    assert rel_err(o32, o_ref) > err  # and the arm is really different from fp32 boundaries


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
    assert rel_err(torch.cat([o_1, o_2]), o_one) < 1e-5
    assert rel_err(pool_b, pool_a) < 1e-5


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
    qn, kn = reference.l2norm(x.q) * K**-0.5, reference.l2norm(x.k)
    g, beta = reference.gate(x.g_raw, x.A_log, x.dt_bias), torch.sigmoid(x.beta_raw.double())
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


def test_gated_rmsnorm_matches_reference(tk):
    o, g, w = torch.randn(5, H, 48), torch.randn(5, H, 48), torch.randn(48)
    y = tk.norm.gated_rmsnorm(o.to(torch.bfloat16), g, w, 1e-5)
    assert y.dtype == torch.bfloat16
    assert rel_err(y, reference.gated_rmsnorm(o.to(torch.bfloat16), g, w, 1e-5)) < 1e-2
    assert rel_err(tk.norm.gated_rmsnorm(o, g, w, 1e-5), reference.gated_rmsnorm(o, g, w, 1e-5)) < 1e-6
