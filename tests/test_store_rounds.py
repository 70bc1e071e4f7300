"""Several store chunks of a sequence in one prefill forward (`evalkit.model.store_rounds`): the
rounds' rows and store positions, and the engine's results bit for bit those of one forward per
store chunk (KDA + MLA, Gated DeltaNet, Mamba2) with fewer forwards, while a single store at the
piece's end would have differed (so the comparison can fail)."""

from __future__ import annotations

import pytest
import torch
from gdn_fixtures import tiny_gdn
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.model.store_rounds import segments, store_rounds


def test_segments_cut_at_multiples_of_the_chunk():
    assert segments(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert segments(6, 7, 4) == [(6, 8), (8, 12), (12, 13)]
    assert segments(8, 4, 4) == [(8, 12)]


def test_rounds_take_the_rth_chunk_of_every_sequence():
    # sequence 0: positions 6..13 (three segments); sequence 1: 0..2 (one); packed rows 0..7, 8..10
    rounds = store_rounds([6, 0], [7, 3], [5, 9], 4, "cpu")
    assert [r.ranges for r in rounds] == [((0, 2), (7, 10)), ((2, 6),), ((6, 7),)]
    first = rounds[0].batch
    assert first.slots.tolist() == [5, 9]
    assert first.cu_seqlens_cpu.tolist() == [0, 2, 5]
    assert first.has_initial_state.tolist() == [True, False]
    assert first.state_positions.tolist() == [7, 2]
    assert [r.batch.state_positions.tolist() for r in rounds[1:]] == [[11], [12]]
    assert all(r.batch.has_initial_state.tolist() == [True] for r in rounds[1:])
    assert store_rounds([0, 3], [4, 1], [0, 1], 4, "cpu") == []  # one chunk each: no rounds


def _prompts(n: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(40, 300, (n,), generator=g).tolist()
    return [torch.randint(3, 500, (k,), generator=g).tolist() for k in lens]


def _run(loaded, arm: str, **kw):
    eng = LLMEngine(loaded, device="cpu", arm=arm, max_num_batched_tokens=512, max_num_seqs=4, **kw)
    prompts = _prompts(5, seed=11)
    params = [SamplingParams(max_new_tokens=6, ignore_eos=True) for _ in prompts]
    out = eng.generate(prompts, params, use_tqdm=False)
    pairs = [(p[:-20], p[-20:]) for p in prompts]
    return [o.token_ids for o in out], eng.loglikelihood(pairs), eng


def _same_as_one_forward_per_chunk(path):
    tokens, ll, eng = _run(path, "fp16@chunk=64")
    one_tokens, one_ll, one = _run(eng.loaded, "fp16@chunk=64", chunks_per_forward=1)
    assert tokens == one_tokens
    assert ll == one_ll  # float equality: the same stored states at the same positions
    assert eng.stats["prefill_steps"] < one.stats["prefill_steps"]
    assert eng.describe()["batch_invariance"]["chunks_per_forward"] is None
    # a store only where each forward's piece ends (the budget's 512 tokens) computes other numbers
    _, piece_ll, _ = _run(eng.loaded, "fp16@chunk=512")
    assert piece_ll != ll


def test_kda_mla_hybrid(tiny_hybrid_ckpt):
    _same_as_one_forward_per_chunk(str(tiny_hybrid_ckpt))


def test_gated_deltanet(request):
    _same_as_one_forward_per_chunk(str(tiny_gdn(request, "qwen3_next")))


def test_mamba2_hybrid(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    _same_as_one_forward_per_chunk(str(ckpt))


def test_chunks_per_forward_must_be_positive(tiny_hybrid_ckpt):
    from evalkit.errors import InputError

    with pytest.raises(InputError, match="chunks_per_forward"):
        LLMEngine(str(tiny_hybrid_ckpt), device="cpu", chunks_per_forward=0)
