"""The engine (fp32 arm, CPU) against transformers' KimiLinearForCausalLM on the same saved tiny
checkpoints: logits of a full forward, of prefill + single-token steps, of several prefill
chunks; greedy generations; log-likelihoods. Hybrid (KDA + MLA + MoE) and pure KDA."""

from __future__ import annotations

import warnings

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams
from tests.helpers.drive import drive_logits
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4
KINDS = ["hybrid", "pure_kda"]


@pytest.fixture(scope="module", params=KINDS)
def setup(request):
    from transformers import KimiLinearForCausalLM

    ckpt = request.getfixturevalue(f"tiny_{request.param}_ckpt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = KimiLinearForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32")
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 150), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = hf(tokens, use_cache=False).logits[0]
    assert ref.abs().max() > 1.0, "tiny model logits are too flat to be a useful oracle"
    return request.param, ckpt, hf, engine, tokens[0].tolist(), ref


def test_full_forward_logits_match(setup):
    kind, _, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [150], 0), ref) <= REL_TOL, kind


def test_prefill_then_single_token_steps_match(setup):
    kind, _, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [97], 53), ref) <= REL_TOL, kind


def test_several_prefill_chunks_then_steps_match(setup):
    kind, _, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [64, 1, 40, 17, 8], 20), ref) <= REL_TOL, kind


def _hf_greedy(hf, kind: str, prompt: list[int], n: int, eos: int) -> list[int]:
    if kind == "hybrid":
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = hf.generate(
                torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=eos, pad_token_id=eos
            )
        return out[0, len(prompt) :].tolist()
    # transformers' generate() cannot build a cache for pure-KDA configs: re-run full forwards
    ids = list(prompt)
    for _ in range(n):
        with torch.no_grad():
            nxt = int(hf(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax())
        ids.append(nxt)
        if nxt == eos:
            break
    return ids[len(prompt) :]


def test_greedy_generation_identical(setup):
    kind, _, hf, engine, _, _ = setup
    tok = engine.tokenizer
    texts = [
        "Natalia sold clips to 48 of her friends in April,",
        "Weng earns $12 an hour for babysitting.",
        "A robe takes 2 bolts of blue fiber and half that much white fiber. How many",
    ]
    prompts = [tok.encode(t) for t in texts]
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=24), use_tqdm=False)
    eos = tok.eos_token_id
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == _hf_greedy(hf, kind, prompt, 24, eos), kind
        assert out.n_prompt == len(prompt)


def test_loglikelihood_matches_transformers(setup):
    kind, _, _, engine, tokens, ref = setup
    ctx, cont = tokens[:90], tokens[90:150]
    logp_ref = torch.log_softmax(ref.double(), -1)
    want = float(sum(logp_ref[89 + i, t] for i, t in enumerate(cont)))
    greedy_ref = all(int(ref[89 + i].argmax()) == t for i, t in enumerate(cont))
    greedy_cont = [int(ref[89].argmax())]  # the model's own next-token choice
    (lp, greedy), (_, greedy2) = engine.loglikelihood([(ctx, cont), (ctx, greedy_cont)])
    assert abs(lp - want) <= 1e-4 * abs(want), kind
    assert greedy == greedy_ref
    assert greedy2 is True
