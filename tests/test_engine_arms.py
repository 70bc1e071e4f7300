"""A 16-bit arm differs from fp32 only through the rounding of the stored recurrent state.

Oracle: the fp32 arm with its KDA state pools rounded to the 16-bit dtype (round to nearest even)
after every forward pass, i.e. exactly where the 16-bit pool stores. Its logits must equal the
16-bit arm's bit for bit, while plain fp32 differs."""

from __future__ import annotations

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams, Sequence

DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(scope="module")
def fp32(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)


def _drive(
    engine: LLMEngine,
    tokens: list[int],
    prefill: list[int],
    n_decode: int,
    round_to: torch.dtype | None = None,
) -> torch.Tensor:
    runner = engine.runner
    seq = Sequence(list(tokens), SamplingParams())
    runner.attach(seq)

    def after():
        if round_to is not None:
            for pool in engine.state.kda.values():
                pool.copy_(pool.to(round_to).to(pool.dtype))

    rows = []
    try:
        for n in prefill:
            rows.append(runner.prefill([(seq, n)], all_logits=True)[0])
            after()
        for _ in range(n_decode):
            rows.append(runner.decode([seq]))
            after()
    finally:
        runner.detach(seq)
    return torch.cat(rows)


TOKENS = torch.randint(3, 512, (160,), generator=torch.Generator().manual_seed(11)).tolist()


@pytest.mark.parametrize("arm", ["fp16", "bf16"])
def test_16bit_arm_equals_fp32_with_rounded_state(fp32, arm):
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2)
    got = _drive(eng, TOKENS, [70, 30], 60)
    simulated = _drive(fp32, TOKENS, [70, 30], 60, round_to=DT[arm])
    plain = _drive(fp32, TOKENS, [70, 30], 60)
    assert torch.equal(got, simulated)
    diff = (got - plain).abs().max().item()
    assert diff > 1e-6, "the 16-bit state should move the logits at all"
    assert diff < (0.5 if arm == "bf16" else 0.05) * plain.abs().max().item()


def test_intra_chunk_rounding_is_rounding_at_chunk_boundaries(fp32):
    """intra_chunk_dtype='fp16' with kda_chunk_size=32 = storing the carried state every 32 tokens."""
    eng = LLMEngine(
        fp32.loaded,
        device="cpu",
        state_dtype="fp32",
        intra_chunk_dtype="fp16",
        kda_chunk_size=32,
        max_num_seqs=2,
    )
    got = _drive(eng, TOKENS, [100], 0)
    pieces = _drive(fp32, TOKENS[:100], [32, 32, 32, 4], 0, round_to=torch.float16)
    plain = _drive(fp32, TOKENS[:100], [100], 0)
    assert torch.equal(got, pieces) and not torch.equal(got, plain)


def test_twin_check_routes_16bit_launches(fp32):
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="fp16", twin_check=1, max_num_seqs=2)
    plain = LLMEngine(fp32.loaded, device="cpu", state_dtype="fp16", max_num_seqs=2)
    sp = SamplingParams(max_new_tokens=5, ignore_eos=True)
    prompts = [TOKENS[:30], TOKENS[30:100]]
    assert [o.token_ids for o in eng.generate(prompts, sp, use_tqdm=False)] == [
        o.token_ids for o in plain.generate(prompts, sp, use_tqdm=False)
    ]
    summary = eng.describe()["twin_check"]["summary"]
    assert set(summary) == {"decode/fp16", "prefill/fp16"}
    assert all(v["checked"] > 0 and v["failed"] == 0 for v in summary.values())
    assert plain.describe()["twin_check"] is None
