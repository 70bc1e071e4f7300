"""The engine on a NemotronH (Mamba2 hybrid) checkpoint against transformers' own
NemotronHForCausalLM on a tiny random checkpoint saved by transformers (blocks "ME*-M-": Mamba2
with conv bias and 2 groups, MoE, attention without RoPE, relu2 MLP): logits of a full forward,
of prefill + single-token steps, of several prefill chunks; greedy generations; and every state
format bit-exact against the store oracle (the fp32 arm with its SSM pools rounded where the
arm's pool stores, `tests/helpers/drive.py`)."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.kernels import parse_format
from tests.helpers.drive import TOKENS, drive_logits
from tests.helpers.hybrid_parity import (
    assert_batch_invariant,
    assert_format_is_the_rounded_fp32_state,
    assert_greedy_matches_transformers,
)
from tests.helpers.numerics import rel_err

REL_TOL = 1e-4


@pytest.fixture(scope="module")
def ckpt(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    return build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")


@pytest.fixture(scope="module")
def setup(ckpt):
    from transformers import AutoModelForCausalLM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert type(hf).__name__ == "NemotronHForCausalLM"
    engine = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 150), generator=torch.Generator().manual_seed(7))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(tokens, use_cache=False).logits[0]
    assert ref.abs().max() > 1.0, "tiny model logits are too flat to be a useful oracle"
    return hf, engine, tokens[0].tolist(), ref


def test_pools_hold_the_mamba2_state_and_conv(setup):
    _, engine, _, _ = setup
    assert sorted(engine.state.kda) == [0, 4] and sorted(engine.state.mla) == [2]
    assert tuple(engine.state.kda[0].shape[1:]) == (8, 16, 8)  # [H, P, N]
    assert tuple(engine.state.conv[0].shape[1:]) == (16 * 8 + 2 * 2 * 8, 3)  # [I + 2GN, K-1]


def test_full_forward_logits_match(setup):
    _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [150], 0), ref) <= REL_TOL


def test_prefill_then_single_token_steps_match(setup):
    _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [97], 53), ref) <= REL_TOL


def test_several_prefill_chunks_then_steps_match(setup):
    _, engine, tokens, ref = setup
    assert rel_err(drive_logits(engine, tokens, [64, 1, 40, 17, 8], 20), ref) <= REL_TOL


def test_greedy_generation_identical(setup):
    hf, engine, _, _ = setup
    texts = ["Natalia sold clips to 48 of her friends in April,", "Weng earns $12 an hour for babysitting."]
    assert_greedy_matches_transformers(hf, engine, texts)


@pytest.mark.parametrize("arm", ["fp16", "bf16", "bf16-rtz", "fp8_e4m3", "m5-sr:2", "fp16-sr"])
def test_every_format_equals_fp32_with_the_state_rounded_where_the_pool_stores(setup, arm):
    _, fp32, _, _ = setup
    eng = assert_format_is_the_rounded_fp32_state(fp32, arm)
    fmt = parse_format(arm)
    assert all(p.dtype == fmt.pool_dtype for p in eng.state.kda.values())


def test_twin_check_routes_the_ssd_launches(setup):
    _, fp32, _, _ = setup
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="bf16", twin_check=1, max_num_seqs=2)
    sp = SamplingParams(max_new_tokens=4, ignore_eos=True)
    eng.generate([TOKENS[:30], TOKENS[30:90]], sp, use_tqdm=False)
    summary = eng.describe()["twin_check"]["summary"]
    assert set(summary) == {"ssd_decode/bf16", "ssd_prefill/bf16"}
    assert all(v["checked"] > 0 and v["failed"] == 0 for v in summary.values())


def test_intra_chunk_rounding_is_rounding_at_kernel_chunk_boundaries(setup):
    """intra_chunk_dtype='fp16' with kda_chunk_size=32 = storing the carried SSM state every 32
    tokens (to the last bits that 32-token passes change elsewhere: attention over a shorter query
    block, ~1e-6 here, against the rounding's ~4e-5)."""
    _, fp32, _, _ = setup
    eng = LLMEngine(
        fp32.loaded,
        device="cpu",
        state_dtype="fp32",
        intra_chunk_dtype="fp16",
        kda_chunk_size=32,
        max_num_seqs=2,
    )
    got = drive_logits(eng, TOKENS, [100], 0)
    pieces = drive_logits(fp32, TOKENS[:100], [32, 32, 32, 4], 0, round_to=torch.float16)
    plain = drive_logits(fp32, TOKENS[:100], [100], 0)
    assert (got - pieces).abs().max() < 5e-6 and (got - plain).abs().max() > 2e-5


def _forced_oracle(fp32, prompt, answer, chunks):
    """Per answer token log p from the fp32 engine with its pools rounded to bf16 after every
    prefill chunk of `chunks` and after every decode step: where a bf16 arm's pool stores."""
    logits = drive_logits(fp32, prompt + answer[:-1], chunks, len(answer) - 1, round_to=torch.bfloat16)
    rows = torch.log_softmax(logits[len(prompt) - 1 :].double(), -1)
    return [float(rows[i, t]) for i, t in enumerate(answer)]


@pytest.mark.parametrize("chunk, pieces", [(32, [32, 32, 32, 4]), (512, [100])])
def test_full_vs_chunked_prefill_factor_is_the_arms_chunk(setup, chunk, pieces):
    """The factor the field met (store points at prompt end only vs every prefill chunk) is the
    arm's `@chunk=N`: N >= the prompt length stores the state once, at the prompt's end (full
    prefill); a smaller N stores it after every N tokens. Decode-mode scores of a bf16 arm equal the
    store oracle with exactly those store points, and the two arms differ."""
    _, fp32, _, _ = setup
    prompt, answer = TOKENS[:100], TOKENS[100:110]
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="bf16", prefill_chunk_size=chunk, max_num_seqs=2)
    (score,) = eng.forced_decode([(prompt, answer)])
    want = _forced_oracle(fp32, prompt, answer, pieces)
    assert score.token_logprobs == pytest.approx(want, abs=1e-6)
    other = _forced_oracle(fp32, prompt, answer, [100] if chunk == 32 else [32, 32, 32, 4])
    assert max(abs(a - b) for a, b in zip(want, other)) > 1e-5


def test_random_init_follows_transformers_init(setup):
    """The benchmark's random NemotronH (any size, no checkpoint) sets the mixer's 1-D parameters as
    transformers' own init does, and runs."""
    from transformers import NemotronHConfig, NemotronHForCausalLM

    from evalkit.model.nemotron_h.random_init import random_nemotron_h_model

    _, fp32, _, _ = setup
    lm = random_nemotron_h_model(fp32.arch, "cpu", torch.float32, seed=0)
    raw = {k: v for k, v in fp32.loaded.raw_config.items() if k != "time_step_limit"}  # the default
    hf = NemotronHForCausalLM(NemotronHConfig(**raw)).model.layers[0].mixer
    ours = lm.layers[0].mixer
    for name in ("A_log", "D"):
        torch.testing.assert_close(getattr(ours, name), getattr(hf, name).detach(), rtol=0, atol=0)
    for dt_bias in (ours.dt_bias, hf.dt_bias.detach()):  # random: softplus(dt_bias) in [1e-3, 0.1]
        dt = torch.nn.functional.softplus(dt_bias)
        assert float(dt.min()) >= 1e-3 * (1 - 1e-5) and float(dt.max()) <= 0.1 * (1 + 1e-5)
    torch.testing.assert_close(ours.norm, hf.norm.weight.detach(), rtol=0, atol=0)
    eng = LLMEngine(fp32.loaded.__class__(lm, fp32.arch, None, fp32.loaded.path, fp32.loaded.raw_config),
                    device="cpu", state_dtype="bf16", max_num_seqs=1)  # fmt: skip
    (out,) = eng.generate([TOKENS[:20]], SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False)
    assert len(out.token_ids) == 3


def test_batch_invariant(setup):
    """A request's scores do not depend on what shares its batch (the MoE's per-expert GEMMs
    included), so arms compare like with like."""
    _, fp32, _, _ = setup
    assert_batch_invariant(fp32)
