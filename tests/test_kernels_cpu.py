"""The float64 reference against transformers' own torch code, and the float32 CPU path against
the reference. Fresh random inputs every run (no fixed seed)."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import STATE_DTYPES, KernelInputError, cpu, reference
from evalkit.kernels.kda_decode import reference as decode_reference
from evalkit.kernels.testing import check_rounded_like_reference, kda_inputs, random_cu_seqlens, random_pool
from tests.helpers.numerics import rel_err

H, K, V = 2, 16, 32


# ---------------------------------------------------------------- reference vs transformers


def test_reference_matches_transformers_recurrent_and_gate():
    from transformers.models.kimi_linear import modeling_kimi_linear as M

    T = 20
    x = kda_inputs(T, H, K, K)
    S0 = torch.randn(1, H, K, K)
    g = decode_reference.gate(x.g_raw, x.A_log, x.dt_bias)
    # transformers' gate formula on the same numbers
    gx = x.g_raw + x.dt_bias.view(H, K)
    g_tf = -torch.exp(x.A_log.view(1, H, 1)) * torch.where(gx > 20, gx, torch.log(1 + torch.exp(gx)))
    assert rel_err(g_tf, g) < 1e-6
    beta = torch.sigmoid(x.beta_raw)
    o_tf, S_tf = M.recurrent_kimi_delta_attention(
        x.q[None],
        x.k[None],
        x.v[None],
        g.float()[None],
        beta[None],
        S0.clone(),
        True,
        use_qk_l2norm_in_kernel=True,
    )
    pool = S0.double().clone()
    one = (torch.tensor([0]), random_cu_seqlens([T]), torch.tensor([True]))
    o = reference.kda_prefill(*x.args(), pool, *one)
    assert rel_err(o_tf[0], o) < 1e-5
    assert rel_err(S_tf[0], pool[0]) < 1e-5


def test_reference_conv_and_norm_match_transformers():
    from transformers.models.kimi_linear import modeling_kimi_linear as M

    C, W, T = 12, 4, 9
    x = torch.randn(T, C)
    w = torch.randn(C, W)
    y_tf = M.causal_conv1d_fn(x.T[None], w, activation="silu")[0].T
    pool = torch.zeros(1, C, W - 1, dtype=torch.float64)
    one = (torch.tensor([0]), random_cu_seqlens([T]), torch.tensor([False]))
    y = reference.causal_conv1d_prefill(x, w, pool, *one)
    assert rel_err(y_tf, y) < 1e-6
    # decode update: transformers keeps W columns, we keep W-1; same output
    state_tf = torch.cat([torch.zeros(1, C, 1), pool.float().clone()], dim=2)
    xn = torch.randn(1, C)
    y1_tf = M.causal_conv1d_update(xn[:, :, None], state_tf, w, activation="silu")[0, :, 0]
    y1 = reference.causal_conv1d_decode(xn, w, pool, torch.tensor([0]))
    assert rel_err(y1_tf, y1[0]) < 1e-6

    norm = M.KimiLinearRMSNormGated(V, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(V))
    o, gt = torch.randn(5, H, V), torch.randn(5, H, V)
    assert rel_err(norm(o, gt).detach(), reference.gated_rmsnorm(o, gt, norm.weight.detach(), 1e-5)) < 1e-6


# ---------------------------------------------------------------- CPU float32 path vs reference


@pytest.mark.parametrize("pool_name", list(STATE_DTYPES))
def test_cpu_decode_matches_reference(pool_name):
    dt = STATE_DTYPES[pool_name]
    B, S = 5, 9
    x = kda_inputs(B, H, K, V)
    pool = random_pool(S, H, K, V, dt)
    slots = torch.randperm(S)[:B]
    before = pool.clone()
    pool_ref = pool.double()  # the reference keeps the exact float64 state
    o = cpu.kda_decode(*x.args(), pool, slots)
    o_ref = reference.kda_decode(*x.args(), pool_ref, slots)
    assert rel_err(o, o_ref) < 1e-5
    untouched = torch.ones(S, dtype=torch.bool)
    untouched[slots] = False
    assert torch.equal(pool[untouched], before[untouched])
    if dt == torch.float32:
        assert rel_err(pool[slots], pool_ref[slots]) < 1e-5
    else:  # the CPU path rounds its fp32 state to nearest even
        check_rounded_like_reference(pool[slots], pool_ref[slots])


@pytest.mark.parametrize("intra", [None, torch.bfloat16])
@pytest.mark.parametrize("pool_name", ["fp32", "bf16"])
def test_cpu_prefill_matches_reference(pool_name, intra):
    dt = STATE_DTYPES[pool_name]
    lengths = [int(n) for n in torch.randint(1, 40, (3,))] + [33]
    T, S = sum(lengths), 6
    x = kda_inputs(T, H, K, V)
    pool = random_pool(S, H, K, V, dt)
    slots = torch.randperm(S)[: len(lengths)]
    init = torch.tensor([True, False, True, False])
    pool[slots[~init]] = float("nan")  # must be ignored
    pool_ref = pool.double()
    args = (pool, slots, random_cu_seqlens(lengths), init)
    o = cpu.kda_prefill(*x.args(), *args, chunk_size=16, intra_chunk_dtype=intra)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, *args[1:], chunk_size=16, intra_chunk_dtype=intra)
    tol = 1e-5 if intra is None else 2e-2  # bf16 boundary roundings can flip one ulp differently
    assert torch.isfinite(o).all()
    assert rel_err(o, o_ref) < tol
    if dt == torch.float32 or intra is not None:
        assert rel_err(pool[slots], pool_ref[slots]) < tol
    else:
        check_rounded_like_reference(pool[slots], pool_ref[slots])


def test_cpu_prefill_equals_decode_steps_fp32():
    T = 21
    x = kda_inputs(T, H, K, V)
    pool_a = random_pool(2, H, K, V, torch.float32)
    pool_b = pool_a.clone()
    slot = torch.tensor([1])
    o_pre = cpu.kda_prefill(*x.args(), pool_a, slot, random_cu_seqlens([T]), torch.tensor([True]))
    o_dec = torch.cat([cpu.kda_decode(*x.rows(slice(t, t + 1)).args(), pool_b, slot) for t in range(T)])
    # prefill is chunked (matrix products), decode recurrent: equal up to fp32 rounding
    assert rel_err(o_dec, o_pre) < 1e-5
    assert rel_err(pool_b, pool_a) < 1e-5


def test_cpu_conv_and_norm_match_reference():
    C, W = 10, 4
    lengths = [5, 1, 7]
    x = torch.randn(sum(lengths), C, dtype=torch.bfloat16)
    w = torch.randn(C, W)
    pool = torch.randn(4, C, W - 1).to(torch.bfloat16)
    slots = torch.tensor([3, 0, 2])
    init = torch.tensor([True, False, True])
    pool_ref = pool.clone()
    y = cpu.causal_conv1d_prefill(x, w, pool, slots, random_cu_seqlens(lengths), init)
    y_ref = reference.causal_conv1d_prefill(x, w, pool_ref, slots, random_cu_seqlens(lengths), init)
    assert y.dtype == torch.bfloat16 and rel_err(y, y_ref) < 1e-2
    assert torch.equal(pool, pool_ref)  # raw inputs are copied, not rounded
    xd = torch.randn(3, C, dtype=torch.bfloat16)
    assert (
        rel_err(
            cpu.causal_conv1d_decode(xd, w, pool, slots),
            reference.causal_conv1d_decode(xd, w, pool_ref, slots),
        )
        < 1e-2
    )
    assert torch.equal(pool, pool_ref)
    o, gt, nw = torch.randn(4, H, V), torch.randn(4, H, V), torch.randn(V)
    assert rel_err(cpu.gated_rmsnorm(o, gt, nw, 1e-5), reference.gated_rmsnorm(o, gt, nw, 1e-5)) < 1e-6


def test_unknown_pool_dtype_is_refused():
    x = kda_inputs(2, H, K, V)
    pool = torch.zeros(2, H, K, V, dtype=torch.float64)
    with pytest.raises(KernelInputError, match="fp32.*fp16.*bf16"):
        cpu.kda_decode(*x.args(), pool, torch.tensor([0, 1]))


def test_naive_forms_match_reference():
    """The plain-torch forms in each op folder (naive.py) agree with the token-by-token reference."""
    from evalkit.kernels.gated_rmsnorm.naive import naive_gated_rmsnorm
    from evalkit.kernels.kda_decode.naive import naive_decode_step
    from evalkit.kernels.short_conv.naive import naive_conv_sequence

    x = kda_inputs(1, H, K, V)
    S = torch.randn(H, K, V, dtype=torch.float64)
    qn, kn = decode_reference.l2norm(x.q[0]) * K**-0.5, decode_reference.l2norm(x.k[0])
    g, beta = decode_reference.gate(x.g_raw, x.A_log, x.dt_bias)[0], torch.sigmoid(x.beta_raw[0].double())
    S_n, o_n = naive_decode_step(S, qn, kn, x.v[0].double(), g, beta)
    for h in range(H):
        S_r, o_r = decode_reference.step(S[h], qn[h], kn[h], x.v[0, h].double(), g[h], beta[h])
        assert rel_err(S_n[h], S_r) < 1e-12 and rel_err(o_n[h], o_r) < 1e-12

    C, W, L = 6, 4, 9
    xs, w, prefix = torch.randn(L, C), torch.randn(C, W), torch.randn(C, W - 1)
    y_n, new_prefix = naive_conv_sequence(xs, w, prefix)
    pool = prefix[None].double().clone()
    one = (torch.tensor([0]), random_cu_seqlens([L]), torch.tensor([True]))
    y_r = reference.causal_conv1d_prefill(xs, w, pool, *one)
    assert rel_err(y_n, y_r) < 1e-6 and torch.equal(new_prefix.double(), pool[0])

    o, gt, nw = torch.randn(3, H, V), torch.randn(3, H, V), torch.randn(V)
    assert rel_err(naive_gated_rmsnorm(o, gt, nw, 1e-5), reference.gated_rmsnorm(o, gt, nw, 1e-5)) < 1e-6
