"""Drive one sequence through an engine's runner chunk by chunk and collect its logits, optionally
rounding the recurrent-state pools after every forward pass: the fp32 oracle an arm must equal."""

from __future__ import annotations

import torch

from evalkit.engine import LLMEngine, SamplingParams, Sequence
from evalkit.kernels import round_to_format

STATE_16BIT = {"fp16": torch.float16, "bf16": torch.bfloat16}
TOKENS = torch.randint(3, 512, (160,), generator=torch.Generator().manual_seed(11)).tolist()


def drive_logits(
    engine: LLMEngine,
    tokens: list[int],
    prefill: list[int],
    n_decode: int,
    round_to: torch.dtype | str | None = None,
) -> torch.Tensor:
    """Logits of prefill chunks of `prefill` lengths then `n_decode` decodes. `round_to` a dtype:
    the pools go through it (round-to-nearest-even); a format name: the rounding oracle at the
    sequence's store position, seeded with the layer index."""
    runner = engine.runner
    seq = Sequence(list(tokens), SamplingParams())
    runner.attach(seq)

    def after():
        if isinstance(round_to, torch.dtype):
            for pool in engine.state.kda.values():
                pool.copy_(pool.to(round_to).to(pool.dtype))
        elif round_to is not None:
            pos = torch.tensor([seq.num_computed - 1])
            for layer, pool in engine.state.kda.items():
                stored = round_to_format(pool[seq.slot][None], round_to, sr_seed=layer, positions=pos)
                pool[seq.slot] = stored[0].to(pool.dtype)

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


def assert_16bit_arm_equals_rounded_fp32(fp32: LLMEngine, arm: str) -> None:
    """The `arm` engine's logits equal the fp32 engine's with its pools rounded to the arm's dtype
    after every pass, bit for bit, and differ from plain fp32 by a small but nonzero amount."""
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2)
    assert eng.state.kda[eng.arch.kda_layers[0]].dtype == STATE_16BIT[arm]
    got = drive_logits(eng, TOKENS, [70, 30], 60)
    simulated = drive_logits(fp32, TOKENS, [70, 30], 60, round_to=STATE_16BIT[arm])
    plain = drive_logits(fp32, TOKENS, [70, 30], 60)
    assert torch.equal(got, simulated)
    diff = (got - plain).abs().max().item()
    assert diff > 1e-6, "the 16-bit state should move the logits at all"
    assert diff < (0.5 if arm == "bf16" else 0.05) * plain.abs().max().item()
