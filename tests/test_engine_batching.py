"""Continuous batching must not change results: determinism, batch invariance (max batch 64 vs 7,
bit-identical log-likelihoods), batched == one-at-a-time, and no state leaking through reused
slots."""

from __future__ import annotations

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=64)


def _prompts(n: int, seed: int = 0, lo: int = 3, hi: int = 120) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(lo, hi, (n,), generator=g).tolist()
    return [torch.randint(3, 512, (k,), generator=g).tolist() for k in lens]


def _params(n: int) -> list[SamplingParams]:
    return [SamplingParams(max_new_tokens=8 + (i * 5) % 13, ignore_eos=True) for i in range(n)]


def test_same_requests_twice_bit_identical(engine):
    prompts = _prompts(12, seed=1)
    a = engine.generate(prompts, _params(12), use_tqdm=False)
    b = engine.generate(prompts, _params(12), use_tqdm=False)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    pairs = [(p[:-4], p[-4:]) for p in prompts if len(p) > 5]
    assert engine.loglikelihood(pairs) == engine.loglikelihood(pairs)  # float equality, not approx


def test_batch_of_64_vs_7_identical(engine):
    prompts = _prompts(20, seed=2)
    small = LLMEngine(engine.loaded, device="cpu", max_num_seqs=7)
    big = engine.generate(prompts, _params(20), use_tqdm=False)
    little = small.generate(prompts, _params(20), use_tqdm=False)
    assert engine.stats["max_batch"] > 7 >= small.stats["max_batch"]
    assert [o.token_ids for o in big] == [o.token_ids for o in little]
    # the logits themselves are bit-identical, whatever the batch
    pairs = [(p[: len(p) // 2], p[len(p) // 2 :]) for p in prompts if len(p) > 3]
    assert engine.loglikelihood(pairs) == small.loglikelihood(pairs)


def test_mixed_lengths_batched_equals_one_at_a_time(engine):
    prompts = _prompts(9, seed=3, lo=2, hi=300)  # some prompts need two prefill chunks (256)
    params = _params(9)
    batched = engine.generate(prompts, params, use_tqdm=False)
    alone = [engine.generate([p], [sp], use_tqdm=False)[0] for p, sp in zip(prompts, params)]
    assert [o.token_ids for o in batched] == [o.token_ids for o in alone]
    assert [o.n_generated for o in batched] == [sp.max_new_tokens for sp in params]


def test_reused_slots_do_not_leak_state(engine):
    probe = _prompts(1, seed=4)[0]
    sp = SamplingParams(max_new_tokens=12, ignore_eos=True)
    fresh = LLMEngine(engine.loaded, device="cpu", max_num_seqs=2)
    want = fresh.generate([probe], [sp], use_tqdm=False)[0].token_ids
    used = LLMEngine(engine.loaded, device="cpu", max_num_seqs=2)
    used.generate(_prompts(5, seed=5), _params(5), use_tqdm=False)  # dirty both slots
    # every freed slot is zero again
    for pool in list(used.state.kda.values()) + list(used.state.conv.values()):
        assert torch.count_nonzero(pool[: used.state.num_slots]) == 0
    again = used.generate([probe, probe], [sp, sp], use_tqdm=False)
    assert again[0].token_ids == want and again[1].token_ids == want


def test_non_invariant_mode_gives_the_same_greedy_tokens(engine):
    prompts = _prompts(10, seed=6)
    fast = LLMEngine(engine.loaded, device="cpu", max_num_seqs=64, batch_invariant=False)
    a = engine.generate(prompts, _params(10), use_tqdm=False)
    b = fast.generate(prompts, _params(10), use_tqdm=False)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert fast.describe()["batch_invariant"] is False


def test_prefill_rows_do_not_depend_on_batch_mates(engine):
    """Runner level: a prompt prefilled alone and packed with others (within one forward's budget)
    gives bit-identical logits and stored states."""
    from evalkit.engine import Sequence

    prompts = _prompts(5, seed=2)  # lengths differ, so packed sequences finish at different steps
    runner = engine.runner

    def run(groups):
        seqs = [Sequence(p, SamplingParams()) for p in prompts]
        for s in seqs:
            runner.attach(s)
        logits = []
        for g in groups:
            logits += runner.prefill([(seqs[i], len(prompts[i])) for i in g], all_logits=True)
        states = [torch.stack([pool[s.slot].clone() for pool in engine.state.kda.values()]) for s in seqs]
        for s in seqs:
            runner.detach(s)
        return logits, states

    alone_l, alone_s = run([[i] for i in range(5)])
    packed_l, packed_s = run([[0, 1, 2, 3, 4]])
    assert sum(len(p) for p in prompts) <= engine.config.max_num_batched_tokens
    for a, b in zip(alone_l, packed_l):
        assert torch.equal(a, b)
    for a, b in zip(alone_s, packed_s):
        assert torch.equal(a, b)


def test_prefill_batches_carry_cu_seqlens_on_the_host(engine, monkeypatch):
    """Every prefill batch carries cu_seqlens on the host too, equal to the device copy, and the
    ops that read its values (KDA prefill, short conv) get that copy: on a GPU, reading the device
    copy was a sync per layer."""
    from evalkit.model.layers import kda as kda_layer

    seen, conv = [], kda_layer.kernels.causal_conv1d_prefill

    def spy(x, weight, pool, slots, cu_seqlens, init, **options):
        seen.append(cu_seqlens)
        return conv(x, weight, pool, slots, cu_seqlens, init, **options)

    batches = []
    forward = type(engine.model).forward

    def record(model, batch, state):
        if not batch.is_decode:
            batches.append(batch)
        return forward(model, batch, state)

    monkeypatch.setattr(kda_layer.kernels, "causal_conv1d_prefill", spy)
    monkeypatch.setattr(type(engine.model), "forward", record)
    engine.generate(_prompts(3, seed=9), _params(3), use_tqdm=False)
    assert batches and seen
    for b in batches:
        assert b.cu_seqlens_cpu.device.type == "cpu" and b.cu_seqlens_readable is b.cu_seqlens_cpu
        assert torch.equal(b.cu_seqlens_cpu, b.cu_seqlens.cpu())
    assert all(any(cu is b.cu_seqlens_cpu for b in batches) for cu in seen)


def test_decode_batches_mark_their_dummy_rows(engine, monkeypatch):
    """A decode step wider than its sequences (the fixed width a CUDA graph replays) marks the
    dummy rows in `real_rows`, so the MoE routes them to no expert (tests/test_moe_gemm.py)."""
    batches = []
    forward = type(engine.model).forward

    def record(model, batch, state):
        if batch.is_decode:
            batches.append((batch.real_rows.clone(), batch.slots.clone()))
        return forward(model, batch, state)

    monkeypatch.setattr(type(engine.model), "forward", record)
    engine.generate(_prompts(3, seed=10), _params(3), use_tqdm=False)
    assert batches
    for real, slots in batches:
        n = int(real.sum())
        assert real.shape == slots.shape and 1 <= n <= 3 < real.numel()
        assert real[:n].all() and not real[n:].any()
        assert (slots[n:] == engine.runner.state.scratch_slot).all()
