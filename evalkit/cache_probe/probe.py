"""The probe's sequence per question, and how two answers to one prompt differ.

With a flush endpoint: flush, cold; flush, cold again (the floor: two cold answers); then warm
(the same prompt, its prefix now cached by the second cold request). Without one: cold is the
prompt behind a unique prefix (no earlier request began with it), then warm (the same prefixed
prompt, now cached) twice; the floor is the two warm answers, what the server varies by with
the cache state held equal (a second unique prefix would change the prompt itself)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.cache_probe.server import UNIQUE_PREFIX, ProbeServer, Reply, unique_prefix


@dataclass(frozen=True)
class Difference:
    same_text: bool
    first_token_diff: int | None  # the first generated token that differs; None: none differs
    max_abs_dlogprob: float | None  # over the tokens both generated alike; None: no log-probabilities


def difference(a: Reply, b: Reply) -> Difference:
    if a.tokens is None or b.tokens is None or a.logprobs is None or b.logprobs is None:
        return Difference(a.text == b.text, None, None)
    shared = 0
    while shared < min(len(a.tokens), len(b.tokens)) and a.tokens[shared] == b.tokens[shared]:
        shared += 1
    first = None if shared == len(a.tokens) == len(b.tokens) else shared
    deltas = [abs(x - y) for x, y in zip(a.logprobs[:shared], b.logprobs[:shared])]
    dmax = max((d for d in deltas if not math.isnan(d)), default=0.0)
    return Difference(a.text == b.text, first, dmax)


COLD_FLOOR, WARM_FLOOR = "cold-cold", "warm-warm"


@dataclass(frozen=True)
class QuestionProbe:
    index: int
    cold: Reply
    replicate: Reply  # the floor's second answer: cold again (flushed), else warm again
    warm: Reply
    floor_kind: str = COLD_FLOOR

    @property
    def warm_vs_cold(self) -> Difference:
        return difference(self.cold, self.warm)

    @property
    def floor(self) -> Difference:
        return difference(self.cold if self.floor_kind == COLD_FLOOR else self.warm, self.replicate)


def probe_question(server: ProbeServer, index: int, prompt: str, max_tokens: int) -> QuestionProbe:
    if server.flush_path is not None:
        server.flush()
        cold = server.complete(prompt, max_tokens)
        server.flush()
        replicate = server.complete(prompt, max_tokens)
        warm = server.complete(prompt, max_tokens)
        return QuestionProbe(index, cold, replicate, warm, COLD_FLOOR)
    prefixed = unique_prefix() + prompt
    cold = server.complete(prefixed, max_tokens)
    warm = server.complete(prefixed, max_tokens)
    replicate = server.complete(prefixed, max_tokens)
    return QuestionProbe(index, cold, replicate, warm, WARM_FLOOR)


def cold_method(server: ProbeServer) -> str:
    return f"flush {server.flush_path}" if server.flush_path else UNIQUE_PREFIX


def probe_all(
    server: ProbeServer, prompts: list[str], max_tokens: int, progress: Callable[[int], None] | None = None
) -> list[QuestionProbe]:
    """Questions one at a time: a concurrent request would fill or flush the cache in between."""
    out = []
    for i, prompt in enumerate(prompts):
        out.append(probe_question(server, i, prompt, max_tokens))
        if progress is not None:
            progress(i + 1)
    return out
