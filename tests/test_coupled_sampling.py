"""The engine's coupled sampler: Gumbel-max with uniforms from a counter-based hash of (seed,
sample index, position, vocab id). Identical logits give identical tokens, each draw's marginal is
softmax(logits / T) (after top-k / top-p truncation), and a request's tokens do not depend on the
batch it shares; greedy stays the argmax."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from scipy import stats

from evalkit.engine.sampling import SamplingParams, _mul32, fmix32, row_key, sample_rows, uniforms

LOGITS = torch.tensor([1.0, 0.2, -0.5, 2.0, 0.0, -1.5])


def draws(logits, params, n, seed0=0):
    keys = [row_key(seed0 + i, 0, 0) for i in range(n)]
    return sample_rows(logits.expand(n, -1), [params] * n, keys)


def test_mul32_is_multiplication_modulo_2_32():
    rng = random.Random(0)
    for _ in range(2000):
        x, c = rng.randrange(2**32), rng.randrange(2**32)
        assert _mul32(x, c) == (x * c) % 2**32
    xs = torch.tensor([rng.randrange(2**32) for _ in range(100)], dtype=torch.int64)
    assert _mul32(xs, 0xC2B2AE35).tolist() == [(int(x) * 0xC2B2AE35) % 2**32 for x in xs]
    assert fmix32(torch.tensor([7], dtype=torch.int64)).item() == fmix32(7)  # tensors and ints agree


def test_uniforms_are_a_pure_function_of_the_key_and_uniform():
    keys = [row_key(s, 1, 2) for s in range(64)]
    u = uniforms(keys, 1000, "cpu")
    assert torch.equal(u, uniforms(keys, 1000, "cpu"))
    assert torch.equal(u[5:9], uniforms(keys[5:9], 1000, "cpu"))  # a row ignores the other rows
    assert float(u.min()) > 0.0 and float(u.max()) < 1.0
    assert stats.kstest(u.flatten().numpy(), "uniform").pvalue > 1e-4
    # each key field changes the row
    rows = [row_key(1, 0, 0), row_key(2, 0, 0), row_key(1, 1, 0), row_key(1, 0, 1), row_key(2**40 + 1, 0, 0)]
    assert len(set(rows)) == len(rows)


def test_identical_logits_give_identical_tokens_and_near_logits_mostly_agree():
    torch.manual_seed(0)
    logits = torch.randn(200, 50) * 3
    keys = [row_key(11, 0, p) for p in range(200)]
    p = [SamplingParams(temperature=0.7)] * 200
    a = sample_rows(logits, p, keys)
    assert a == sample_rows(logits.clone(), p, keys)
    near = sample_rows(logits + 0.01 * torch.randn_like(logits), p, keys)
    independent = sample_rows(logits, p, [row_key(12, 0, q) for q in range(200)])
    same_near = np.mean([x == y for x, y in zip(a, near)])
    same_independent = np.mean([x == y for x, y in zip(a, independent)])
    assert same_near > 0.9 and same_independent < same_near


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.7),
        SamplingParams(temperature=1.3, top_k=3),
        SamplingParams(temperature=1.0, top_p=0.8),
    ],
    ids=["T0.7", "top_k3", "top_p0.8"],
)
def test_the_marginal_is_the_truncated_softmax(params):
    n = 12000
    counts = np.bincount(draws(LOGITS, params, n), minlength=LOGITS.numel())
    p = torch.softmax(LOGITS.double() / params.temperature, -1).numpy()
    keep = np.ones_like(p, dtype=bool)
    if params.top_k > 0:
        keep &= p >= np.sort(p)[-params.top_k]
    if params.top_p < 1.0:
        order = np.argsort(-p)
        before = np.cumsum(p[order]) - p[order]
        keep[order[before >= params.top_p]] = False
    q = np.where(keep, p, 0.0)
    q /= q.sum()
    assert counts[~keep].sum() == 0
    chi = stats.chisquare(counts[keep], q[keep] * n)
    assert chi.pvalue > 1e-4, (counts, q * n)


def test_engine_batch_composition_does_not_change_a_seeded_request(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    eng = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu")
    mine = SamplingParams(max_new_tokens=6, temperature=1.0, top_p=0.95, seed=123, ignore_eos=True)
    alone = eng.generate(["The pass key is"], mine, use_tqdm=False)[0].token_ids
    others = [SamplingParams(max_new_tokens=6, temperature=0.8, seed=s, ignore_eos=True) for s in (1, 2)]
    batch = eng.generate(
        ["Hello there", "The pass key is", "Question: 1+1?"], [others[0], mine, others[1]], use_tqdm=False
    )
    assert batch[1].token_ids == alone
    second = SamplingParams(
        max_new_tokens=6, temperature=1.0, top_p=0.95, seed=123, sample_index=1, ignore_eos=True
    )
    assert eng.generate(["The pass key is"], second, use_tqdm=False)[0].token_ids != alone
    greedy = eng.generate(
        ["The pass key is"], SamplingParams(max_new_tokens=6, ignore_eos=True), use_tqdm=False
    )
    logits_path = eng.forced_decode([("The pass key is", greedy[0].token_ids)])[0]
    assert all(m >= 0 for m in logits_path.margins)  # greedy: each token is the argmax


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the hash must agree across devices")
def test_the_gpu_draws_the_cpu_uniforms_and_tokens():
    keys = [row_key(s, s % 3, s % 7) for s in range(16)]
    vocab = 163_840  # Kimi-Linear's
    assert torch.equal(uniforms(keys, vocab, "cuda").cpu(), uniforms(keys, vocab, "cpu"))
    logits = torch.randn(16, vocab, generator=torch.Generator().manual_seed(1)) * 4
    params = [SamplingParams(temperature=0.8, top_p=0.9, top_k=[0, 40][s % 2]) for s in range(16)]
    assert sample_rows(logits.cuda(), params, keys) == sample_rows(logits, params, keys)


def test_a_row_draws_the_same_alone_as_in_a_mixed_batch():
    torch.manual_seed(2)
    logits = torch.randn(12, 300) * 2
    params = [SamplingParams(temperature=[0.5, 1.0, 1.7][i % 3], top_k=[0, 5, -1, 40][i % 4],
                             top_p=[1.0, 0.7, 0.95][i % 3]) for i in range(12)]  # fmt: skip
    keys = [row_key(i, 0, i) for i in range(12)]
    batch = sample_rows(logits, params, keys)
    assert batch == [sample_rows(logits[i : i + 1], [params[i]], [keys[i]])[0] for i in range(12)]
