"""Decode-mode teacher forcing (`LLMEngine.forced_decode`): agrees with prefill-mode scoring on an
fp32 state, equals a hand-rolled prefill-then-decode loop, and is batch-invariant."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams, Sequence
from evalkit.engine.forced import row_scores

PROMPT = "Natalia sold clips to 48 of her friends in April, and then she sold half as many"
ANSWER = " clips in May. How many clips did Natalia sell altogether?"


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=8)


def _ids(engine, text):
    return list(engine.tokenizer.encode(text, add_special_tokens=False))


def test_decode_mode_equals_prefill_mode_on_an_fp32_state(engine):
    prompt, answer = _ids(engine, PROMPT), _ids(engine, ANSWER)
    (score,) = engine.forced_decode([(prompt, answer)])
    ((prefill_lp, prefill_greedy),) = engine.loglikelihood([(prompt, answer)])
    assert len(score.token_logprobs) == len(score.margins) == len(answer) > 5
    assert score.tokens == answer
    assert score.logprob == pytest.approx(prefill_lp, abs=1e-5 * len(answer), rel=1e-5)
    assert score.greedy == prefill_greedy


def test_decode_mode_equals_a_hand_rolled_step_loop(engine):
    prompt, answer = _ids(engine, PROMPT), _ids(engine, ANSWER)
    (score,) = engine.forced_decode([(prompt, answer)])
    runner = engine.runner
    seq = Sequence(list(prompt), SamplingParams(max_new_tokens=len(answer)))
    runner.attach(seq)
    rows = [runner.prefill([(seq, len(prompt))])[0][-1]]
    for tok in answer[:-1]:
        seq.token_ids.append(tok)
        rows.append(runner.decode([seq])[0])
    runner.detach(seq)
    logits = torch.stack(rows).float()
    logp = torch.log_softmax(logits, -1)[torch.arange(len(answer)), torch.tensor(answer)]
    assert score.token_logprobs == pytest.approx(logp.tolist(), abs=1e-6)
    best_other = [max(v for j, v in enumerate(row.tolist()) if j != a) for row, a in zip(logits, answer)]
    want = [row[a].item() - b for row, a, b in zip(logits, answer, best_other)]
    assert score.margins == pytest.approx(want, abs=1e-5)


def test_the_greedy_margin_is_positive_exactly_on_the_greedy_answer(engine):
    prompt = _ids(engine, PROMPT)
    gen = engine.generate([prompt], SamplingParams(max_new_tokens=6, ignore_eos=True), use_tqdm=False)[0]
    other = list(gen.token_ids)
    other[3] = (other[3] + 1) % engine.arch.vocab_size
    greedy, changed = engine.forced_decode([(prompt, gen.token_ids), (prompt, other)])
    assert greedy.greedy and min(greedy.margins) > 0
    assert changed.margins[3] < 0 and changed.margins[:3] == greedy.margins[:3]
    assert not changed.greedy


def test_forced_decode_is_batch_invariant_and_runs_alongside_generation(engine):
    prompt, answer = _ids(engine, PROMPT), _ids(engine, ANSWER)
    (alone,) = engine.forced_decode([(prompt, answer)])
    others = [(_ids(engine, f"Question {i}: how many apples are left?"), answer[:3]) for i in range(4)]
    rid = engine.add_request(PROMPT[:30], SamplingParams(max_new_tokens=12, ignore_eos=True))
    together = engine.forced_decode([*others[:2], (prompt, answer), *others[2:]])
    while engine.has_unfinished():  # the generation request left behind
        engine.step()
    assert together[2].token_logprobs == alone.token_logprobs  # float equality, not approx
    assert together[2].margins == alone.margins
    assert rid is not None


def test_row_scores_on_a_hand_computed_case():
    logits = torch.tensor([[0.0, 1.0, 3.0], [2.0, 2.0, 0.0]])
    logp, margin = row_scores(logits, torch.tensor([1, 0]))
    z0 = math.log(1 + math.e + math.e**3)
    assert logp[0] == pytest.approx(1.0 - z0) and margin[0] == pytest.approx(-2.0)
    assert margin[1] == 0.0


def _run_all(engine):
    outs = {}
    while engine.has_unfinished():
        for out in engine.step().outputs:
            outs[out.request_id] = out
    return outs


def test_a_forked_answer_equals_a_separately_prefilled_one_and_leaves_generation_alone(engine):
    """The fork copies the post-prompt state (KDA, conv and MLA rows: the hybrid checkpoint has
    all three) instead of prefilling again; the numbers must be the same, the generation too."""
    prompt, answer = _ids(engine, PROMPT), _ids(engine, ANSWER)
    (alone,) = engine.forced_decode([(prompt, answer)])
    params = SamplingParams(max_new_tokens=10, ignore_eos=True)
    plain = engine.generate([prompt], params, use_tqdm=False)[0]
    other = engine.add_request(_ids(engine, "Question: how many apples?"), params, forced_answer=answer[:2])
    f_other = engine.forced_request_id(other)
    rid = engine.add_request(prompt, params, forced_answer=answer)
    fid = engine.forced_request_id(rid)
    outs = _run_all(engine)
    assert outs[fid].forced.token_logprobs == alone.token_logprobs  # exactly
    assert outs[fid].forced.margins == alone.margins
    assert outs[rid].token_ids == plain.token_ids and outs[rid].forced is None
    assert len(outs[f_other].forced.token_logprobs) == 2
    assert engine.state.free_slots == engine.config.max_num_seqs  # every slot, fork ones too, returned


def test_a_fork_reserves_its_slot_at_admission(tiny_pure_kda_ckpt):
    """With two slots, a forked request takes both; the next request waits, nothing deadlocks."""
    eng = LLMEngine(str(tiny_pure_kda_ckpt), device="cpu", max_num_seqs=2)
    prompt = _ids(eng, PROMPT)
    params = SamplingParams(max_new_tokens=3, ignore_eos=True)
    a = eng.add_request(prompt, params, forced_answer=prompt[:4])
    fa = eng.forced_request_id(a)
    b = eng.add_request(prompt, params, forced_answer=prompt[:4])
    fb = eng.forced_request_id(b)
    eng.step()  # prefill: only `a` (and its reserved fork) fit
    assert len(eng.scheduler.waiting) == 1 and eng.scheduler.num_running == 2
    outs = _run_all(eng)
    assert outs[fa].forced.token_logprobs == outs[fb].forced.token_logprobs
    assert outs[a].token_ids == outs[b].token_ids and eng.state.free_slots == 2


def test_the_local_backend_measures_gold_without_a_second_prefill(tiny_hybrid_ckpt):
    from evalkit.backends.base import GenRequest
    from evalkit.backends.local import LocalBackend

    backend = LocalBackend(str(tiny_hybrid_ckpt), arm="fp32", device="cpu", max_num_seqs=4)
    eng = backend.engine
    reqs = [GenRequest(PROMPT, 5, gold=ANSWER), GenRequest(PROMPT[:40], 5), GenRequest(PROMPT, 5, gold=" 7")]
    got = {}
    backend.generate(reqs, lambda i, r: got.setdefault(i, r))
    prompt_tokens = sum(len(eng.encode(r.prompt)) for r in reqs)
    assert eng.stats["prefill_tokens"] == prompt_tokens  # each prompt prefilled once
    (alone,) = eng.forced_decode([(eng.encode(PROMPT), _ids(eng, ANSWER))])
    assert got[0].gold.mode == "decode" and got[0].gold.token_logprobs == alone.token_logprobs
    assert got[1].gold is None and got[2].gold.tokens == _ids(eng, " 7")
    assert got[0].token_ids == got[2].token_ids and len(got[0].token_ids) == got[0].n_generated


def test_row_scores_resolve_a_confident_answer():
    """fp32 would give log p = 0 exactly here, and two arms would tie; float64 does not."""
    logp, margin = row_scores(torch.tensor([[20.0, 0.0, 0.0], [20.0, 0.0, 1.0]]), torch.tensor([0, 0]))
    assert logp[0] == pytest.approx(-2 * math.exp(-20), rel=1e-6)
    assert logp[1] < logp[0] < 0 and margin == [20.0, 19.0]
