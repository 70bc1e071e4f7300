"""The engine (fp32 arm, CPU) against transformers' own Qwen3NextForCausalLM, Qwen3_5ForCausalLM
and Qwen3_5MoeForCausalLM on tiny random checkpoints saved by transformers: logits of a full
forward, of prefill + single-token steps, of several prefill chunks; greedy generations;
log-likelihoods (gated-deltanet.md: GDN, grouped value heads, gated partial-RoPE attention, MoE)."""

from __future__ import annotations

import warnings

import pytest
import torch
from gdn_fixtures import tiny_gdn

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.testing.tiny_gdn_models import FAMILIES
from tests.helpers.drive import drive_logits
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4


@pytest.fixture(scope="module", params=FAMILIES)
def setup(request):
    from transformers import AutoModelForCausalLM

    ckpt = tiny_gdn(request, request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert type(hf).__name__.endswith("ForCausalLM") and hf.config.model_type.startswith(request.param)
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32")
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 150), generator=torch.Generator().manual_seed(7))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(tokens, use_cache=False).logits[0]
    assert ref.abs().max() > 1.0, "tiny model logits are too flat to be a useful oracle"
    return request.param, hf, engine, tokens[0].tolist(), ref


def test_full_forward_logits_match(setup):
    family, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [150], 0), ref) <= REL_TOL, family


def test_prefill_then_single_token_steps_match(setup):
    family, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [97], 53), ref) <= REL_TOL, family


def test_several_prefill_chunks_then_steps_match(setup):
    family, _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [64, 1, 40, 17, 8], 20), ref) <= REL_TOL, family


def test_greedy_generation_identical(setup):
    family, hf, engine, _, _ = setup
    tok = engine.tokenizer
    texts = ["Natalia sold clips to 48 of her friends in April,", "Weng earns $12 an hour for babysitting."]
    prompts = [tok.encode(t) for t in texts]
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=24), use_tqdm=False)
    eos = tok.eos_token_id
    for prompt, out in zip(prompts, outs):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = hf.generate(
                torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=eos, pad_token_id=eos
            )[0, len(prompt) :].tolist()
        assert out.token_ids == want, family


def test_loglikelihood_matches_transformers(setup):
    family, _, engine, tokens, ref = setup
    ctx, cont = tokens[:90], tokens[90:150]
    logp_ref = torch.log_softmax(ref.double(), -1)
    want = float(sum(logp_ref[89 + i, t] for i, t in enumerate(cont)))
    ((lp, _),) = engine.loglikelihood([(ctx, cont)])
    assert abs(lp - want) <= 1e-4 * abs(want), family
