"""Free-running drift: each arm greedily generates G tokens from the same prompt.

Arms run one after another (only one session's caches are alive at a time). The prompt is
prefilled in chunks of `chunk_size`; each generated token is then one decode step, so the state
is rounded once per generated token. EOS is not a stop: all G tokens are generated so every
arm is compared over the same length. Health is checked on every step's logits and on the
states at log-spaced checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from evalkit.backends.probe import DriftModel
from evalkit.drift.free_running import agreement_after, first_divergence, health_flags, repeated_loop
from evalkit.drift.positions import checkpoints
from evalkit.drift.state_metrics import FP16_MAX


@dataclass
class Generation:
    arm: str
    tokens: list[int]
    nonfinite_logits: int = 0  # steps whose logits held NaN/inf
    state_max_abs: float = 0.0
    state_nonfinite: int = 0
    state_trace: list[dict] = field(default_factory=list)  # {generated, max_abs, n_nonfinite}
    seconds: float = 0.0


def generate_greedy(
    model: DriftModel,
    prompt: torch.Tensor,
    arm: str,
    n_tokens: int,
    *,
    chunk_size: int = 1024,
    progress: Callable[[int], None] | None = None,
    deadline: float | None = None,
) -> Generation:
    """Prefill `prompt` in chunks, then greedy-decode `n_tokens` tokens in state dtype `arm`
    (fewer if `deadline`, a `time.perf_counter()` value, passes first)."""
    prompt = prompt.to(torch.long).reshape(-1).to(model.device)
    if prompt.numel() == 0:
        raise ValueError("free-running generation needs a non-empty prompt")
    cps = set(checkpoints(n_tokens, 1)) if n_tokens > 0 else set()
    gen = Generation(arm, [])
    t0 = time.perf_counter()
    sess = model.open_session(arm)
    try:
        logits = None
        for s in range(0, prompt.numel(), chunk_size):
            logits = sess.prefill(prompt[s : s + chunk_size])[-1]
        for i in range(n_tokens):
            if not torch.isfinite(logits).all():
                gen.nonfinite_logits += 1
            tok = int(torch.argmax(logits).item())
            gen.tokens.append(tok)
            if i + 1 < n_tokens:
                logits = sess.decode(torch.tensor([tok], device=model.device))[-1]
            if (i + 1) in cps:
                _check_states(gen, sess.states(), i + 1)
            if progress is not None:
                progress(1)
            if deadline is not None and time.perf_counter() > deadline and i + 1 < n_tokens:
                _check_states(gen, sess.states(), i + 1)
                break
    finally:
        sess.close()
    gen.seconds = time.perf_counter() - t0
    return gen


def _check_states(gen: Generation, states: list[torch.Tensor], generated: int) -> None:
    mx, bad = 0.0, 0
    for s in states:
        f = s.float()
        fin = torch.isfinite(f)
        bad += int((~fin).sum().item())
        if fin.any():
            mx = max(mx, float(f[fin].abs().max().item()))
    gen.state_max_abs = max(gen.state_max_abs, mx)
    gen.state_nonfinite += bad
    gen.state_trace.append({"generated": generated, "max_abs": mx, "n_nonfinite": bad})


def compare_generations(ref: Generation, arm: Generation) -> dict:
    """The free-running summary of one arm against the fp32 arm."""
    div = first_divergence(ref.tokens, arm.tokens)
    loop = repeated_loop(arm.tokens)
    flags = health_flags(
        arm.tokens,
        nonfinite_logits=arm.nonfinite_logits > 0,
        state_max_abs=arm.state_max_abs,
        state_nonfinite=arm.state_nonfinite > 0,
        fp16_max=FP16_MAX,
    )
    if arm.state_nonfinite and "overflow" not in flags and arm.arm == "fp16":
        flags.append("overflow")  # an fp16 pool stores an overflow as inf
    return {
        "arm": arm.arm,
        "n_generated": len(arm.tokens),
        "first_divergence": div,
        "identical": div is None,
        "agreement_after_divergence": agreement_after(ref.tokens, arm.tokens, div),
        "token_agreement": (
            sum(a == b for a, b in zip(ref.tokens, arm.tokens)) / len(arm.tokens) if arm.tokens else None
        ),
        "flags": flags,
        "loop": loop,
        "reference_loop": repeated_loop(ref.tokens),
        "nonfinite_logit_steps": arm.nonfinite_logits,
        "state_max_abs": arm.state_max_abs,
        "state_nonfinite": arm.state_nonfinite,
        "state_trace": arm.state_trace,
        "seconds": arm.seconds,
        "tokens_per_second": len(arm.tokens) / arm.seconds if arm.seconds > 0 else None,
    }
