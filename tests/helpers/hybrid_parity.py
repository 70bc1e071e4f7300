"""The checks every in-process family's parity tests make against transformers' own class and the
store oracle (NemotronH, Granite-4.0-H, Bamba, Falcon-H1): greedy answers, each state format as
fp32 with the state rounded where the pool stores, and batch invariance."""

from __future__ import annotations

import warnings

import torch

from evalkit.engine import LLMEngine, SamplingParams
from tests.helpers.drive import TOKENS, drive_logits

TEXTS = ("Natalia sold clips to 48 of her friends in April,", "Weng earns $12")


def assert_greedy_matches_transformers(hf, engine, texts=TEXTS, max_new_tokens: int = 24) -> None:
    tok = engine.tokenizer
    prompts = [tok.encode(t) for t in texts]
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens), use_tqdm=False)
    eos = tok.eos_token_id
    for prompt, out in zip(prompts, outs):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = hf.generate(
                torch.tensor([prompt]),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=eos,
            )[0, len(prompt) :].tolist()
        assert out.token_ids == want


def assert_format_is_the_rounded_fp32_state(fp32: LLMEngine, arm: str) -> LLMEngine:
    """The arm's logits equal fp32's with the state rounded where the pool stores, and differ
    from plain fp32's (the format moves them at all). Returns the arm's engine."""
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2)
    got = drive_logits(eng, TOKENS, [70, 30], 20)
    assert torch.equal(got, drive_logits(fp32, TOKENS, [70, 30], 20, round_to=arm))
    assert not torch.equal(got, drive_logits(fp32, TOKENS, [70, 30], 20)), "the format should move the logits"
    return eng


def assert_batch_invariant(fp32: LLMEngine) -> None:
    """A request's scores do not depend on what shares its batch."""
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="bf16", max_num_seqs=4)
    alone = eng.loglikelihood([(TOKENS[:50], TOKENS[50:80])])[0]
    batch = eng.loglikelihood(
        [(TOKENS[10:90], TOKENS[90:100]), (TOKENS[:50], TOKENS[50:80]), (TOKENS[3:40], TOKENS[40:60])]
    )
    assert batch[1] == alone
