"""The CPU prefill's chunked form (kda_prefill/cpu_chunked.py) against the float64 reference, the
token-by-token recurrence, and itself inside other batches (batch invariance)."""

from __future__ import annotations

import pytest
import torch

from evalkit.kernels import cpu, reference
from evalkit.kernels.kda_decode.cpu import prepare, step
from evalkit.kernels.kda_prefill import cpu_chunked
from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool
from tests.helpers.numerics import rel_err

H, K, V = 2, 16, 32


@pytest.fixture
def small_groups(monkeypatch):
    """Several chunk groups per sequence at test sizes (the group loop is exercised)."""
    monkeypatch.setattr(cpu_chunked, "GROUP_TOKENS", 64)


@pytest.mark.parametrize("chunk_size", [64, 16, 24])
@pytest.mark.parametrize("intra", [None, torch.float16])
def test_chunked_prefill_matches_float64_reference(small_groups, chunk_size, intra):
    lengths = [150, 1, 64, 37]
    x = kda_inputs(sum(lengths), H, K, V, strong_decay=0.5)
    pool = random_pool(5, H, K, V, torch.float32)
    slots = torch.tensor([4, 0, 2, 1])
    init = torch.tensor([True, False, True, True])
    pool_ref = pool.double()
    args = (slots, random_cu_seqlens(lengths), init)
    kw = dict(chunk_size=chunk_size, intra_chunk_dtype=intra)
    o = cpu.kda_prefill(*x.args(), pool, *args, **kw)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, *args, **kw)
    tol = 3e-5 if intra is None else 5e-3  # an fp16 boundary rounding may flip one ulp differently
    assert torch.isfinite(o).all() and torch.isfinite(pool).all()
    assert rel_err(o, o_ref) < tol
    assert rel_err(pool[slots], pool_ref[slots]) < tol


def _token_loop(x, S: torch.Tensor) -> torch.Tensor:
    """The recurrent form the chunked one replaced: one kda_decode.cpu.step per token."""
    qn, kn, vv, g, beta = prepare(*x.args())
    decay = torch.exp(g)
    return torch.cat([step(S, qn[t : t + 1], kn[t : t + 1], vv[t : t + 1], decay[t : t + 1],
                                beta[t : t + 1]) for t in range(qn.shape[0])])  # fmt: skip


def test_chunked_prefill_close_to_recurrent_form(small_groups):
    T = 200
    x = kda_inputs(T, H, K, V)
    pool = random_pool(1, H, K, V, torch.float32)
    S = pool.clone()
    o_loop = _token_loop(x, S)
    o = cpu.kda_prefill(*x.args(), pool, torch.tensor([0]), random_cu_seqlens([T]), torch.tensor([True]))
    assert rel_err(o, o_loop) < 1e-5
    assert rel_err(pool, S) < 1e-5


def test_chunked_prefill_is_batch_invariant(small_groups):
    """A sequence gives the same bits alone or packed with others, wherever it sits in the pack."""
    lengths = [40, 130, 7]
    x = kda_inputs(sum(lengths), H, K, V)
    pool = random_pool(3, H, K, V, torch.bfloat16)
    init = torch.tensor([True, True, False])
    packed_pool = pool.clone()
    o_packed = cpu.kda_prefill(*x.args(), packed_pool, torch.arange(3), random_cu_seqlens(lengths), init)
    start = 0
    for n, length in enumerate(lengths):
        alone_pool = pool.clone()
        rows = slice(start, start + length)
        o = cpu.kda_prefill(
            *x.rows(rows).args(), alone_pool, torch.tensor([n]), random_cu_seqlens([length]), init[n : n + 1]
        )
        assert torch.equal(o, o_packed[rows])
        assert torch.equal(alone_pool[n], packed_pool[n])
        start += length


def test_strong_forgetting_does_not_overflow():
    """Gates far below any exp range: the chunked form only takes exp of non-positive numbers."""
    T = 96
    x = kda_inputs(T, H, K, V)
    x.g_raw = x.g_raw + 60.0  # per-token log decay around -60 * exp(A_log)
    pool = random_pool(1, H, K, V, torch.float32)
    pool_ref = pool.double()
    args = (torch.tensor([0]), random_cu_seqlens([T]), torch.tensor([True]))
    o = cpu.kda_prefill(*x.args(), pool, *args)
    o_ref = reference.kda_prefill(*x.args(), pool_ref, *args)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-5


def _all_pairs_scores(a, b, G, strict: bool) -> torch.Tensor:
    """The former form of `_pair_scores` (before `strong_pairs.py`): every (i, j) of the square
    took an exp, masked to -inf above the diagonal, once for Aqk and again for Akk."""
    H, n, C, _ = a.shape
    strong = -G[:, :, -1:, :] > cpu_chunked.SAFE_SPAN
    e_pos, e_neg = torch.exp(G).masked_fill(strong, 0.0), torch.exp(-G).masked_fill_(strong, 0.0)
    M = (a * e_pos) @ (b * e_neg).transpose(-1, -2)
    h, c, _, kk = strong.nonzero(as_tuple=True)
    if h.numel():
        Gs, a_s, b_s = G[h, c, :, kk], a[h, c, :, kk], b[h, c, :, kk]
        keep = torch.tril(torch.ones(C, C, dtype=torch.bool))
        decay = torch.exp((Gs[:, :, None] - Gs[:, None, :]).masked_fill_(~keep, float("-inf")))
        M.view(H * n, C, C).index_add_(0, h * n + c, a_s[:, :, None] * b_s[:, None, :] * decay)
    return M.tril_(-1 if strict else 0)


@pytest.mark.parametrize("strong_decay", [0.0, 0.4, 1.0])
def test_strong_pairs_give_the_former_bits(strong_decay):
    """The fast-forgetting channels' terms, computed once and only for j <= i, are bit for bit the
    all-pairs form's (the CPU prefill's results must not move with a speed-up)."""
    block, n = 32, 6
    x = kda_inputs(n * block, H, K, V, strong_decay=strong_decay, generator=torch.Generator().manual_seed(3))
    qn, kn, _, g, _ = prepare(*x.args())
    qc, kc, gc = (t.reshape(n, block, H, K).permute(2, 0, 1, 3) for t in (qn, kn, g))
    G = gc.cumsum(2)
    factors = cpu_chunked._decay_factors(G, torch.exp(G))
    assert (factors[2].h.numel() > 0) == (strong_decay > 0)
    for a, b, strict in ((qc, kc, False), (kc, kc, True)):
        got = cpu_chunked._pair_scores(a, b, strict, factors)
        assert torch.equal(got, _all_pairs_scores(a, b, G, strict))


def test_exp_or_zero_gives_torch_exp_bits():
    """Normal, subnormal, underflowing and special inputs, and a sample of every fp32 value below
    ZERO_BELOW (about one in 4096 of them; all 1.02e9 were checked once on the dev box)."""
    from evalkit.kernels.kda_prefill.fast_exp import ZERO_BELOW, exp_or_zero

    below = torch.tensor([ZERO_BELOW]).view(torch.int32).item() & 0xFFFFFFFF  # a larger pattern is lower
    bits = torch.cat([torch.arange(below - 5000, below + 5000), torch.arange(below, 0xFF800001, 4093)])
    x = torch.cat([
        (bits - (1 << 32)).to(torch.int32).view(torch.float32),
        torch.randn(10_000) * 60.0,
        torch.tensor([float("-inf"), float("inf"), float("nan"), 0.0, -0.0, 88.8, -87.5, -103.9]),
    ])  # fmt: skip
    want = torch.exp(x)
    got = exp_or_zero(x)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert (x < ZERO_BELOW).sum() > 200_000 and (got[x < ZERO_BELOW].view(torch.int32) == 0).all()
