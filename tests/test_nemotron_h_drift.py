"""`evalkit drift` on a Mamba2 hybrid (tiny NemotronH): the block decode (the SSD recurrence stepped
token by token inside a batched forward, each token's state stored the arm's way) against the
engine's own decode steps: the same numbers in fp32, the same stored states for a truncating
format; and a decode-mode run whose bf16 arm drifts while fp32 stays exactly at zero."""

from __future__ import annotations

import pytest
import torch
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.backends.local_probe import EngineDriftModel


@pytest.fixture(scope="module")
def model(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    return EngineDriftModel.load(str(ckpt), device="cpu", max_len=512, chunk_size=32)


def _run(model, impl: str, arm: str, toks):
    model.decode_impl = impl
    try:
        s = model.open_session(arm)
        logits = torch.cat([s.prefill(toks[:32]), s.decode(toks[32:])])
        states = [x.float().clone() for x in s.states()]
        s.close()
    finally:
        model.decode_impl = "block"
    return logits, states


def test_block_decode_matches_engine_decode_steps(model):
    toks = torch.randint(3, 512, (80,), generator=torch.Generator().manual_seed(5))
    a, _ = _run(model, "block", "fp32", toks)
    b, _ = _run(model, "steps", "fp32", toks)
    assert (a - b).abs().max() <= 1e-4 * b.abs().max()
    _, block = _run(model, "block", "bf16-rtz", toks)
    _, steps = _run(model, "steps", "bf16-rtz", toks)
    _, plain = _run(model, "steps", "bf16", toks)

    def dist(x, y):
        return sum(float((p - q).norm() / q.norm()) for p, q in zip(x, y)) / len(x)

    assert len(block) == 2  # the two Mamba2 layers' SSM states
    assert dist(block, steps) < 0.5 * dist(block, plain)


def test_decode_mode_run_fp32_zero_bf16_drifts(model):
    from evalkit.drift.teacher_forced import run_teacher_forced

    toks = torch.randint(3, 512, (96,), generator=torch.Generator().manual_seed(6))
    res = run_teacher_forced(model, toks, ["fp32", "bf16"], "decode", chunk_size=32, decode_block=32)
    kl32, kl16 = (res.traces[a].buckets["kl"] for a in ("fp32", "bf16"))
    assert kl32.count.sum() == 96 and kl32.total.sum() == 0.0
    assert kl16.total.sum() > 0.0
    states = res.traces["bf16"].states
    assert states and max(r["rel_fro"] for r in states) > 0.0
