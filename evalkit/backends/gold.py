"""The paired log-probability measure: how likely an arm finds the reference answer.

Per question and arm, the reference answer (`DocRef.gold`, e.g. " 71432" after "The pass key is")
is teacher-forced after the prompt and scored token by token. Two arms that answer a question the
same way still differ here, so a paired difference of `gold_logprob` has far more power than
exact match. Sample fields (the store contract, ARCHITECTURE.md):

- `gold_mode`: "decode" (in-process engine: each answer token is a decode step, so the state is
  rounded where generation rounds it) or "prompt" (a server's prompt log-probabilities: the answer
  is read as part of the prompt, i.e. in prefill mode); null when not measured.
- `gold_logprob`: log p(answer | prompt), natural log, summed over answer tokens.
- `gold_tokens`: the answer's tokens (ids from the engine; token strings from a server).
- `gold_token_logprobs`: log p of each answer token.
- `gold_margins`: per answer token, log p(answer token) - max log p(any other token): > 0 exactly
  where greedy decoding would produce the answer token (a server gives this only with top-2
  log-probabilities).
- `gold_min_margin`: the smallest margin: > 0 iff greedy decoding reproduces the whole answer;
  "the greedy answer margin changes sign" between two arms compares this.
- `gold_error`: why the measure is missing (e.g. a chat prompt, or malformed log-probabilities),
  else null. A server that refuses prompt log-probabilities stops the run instead
  (`openai_remote.GoldRefused`): every question would miss the measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GoldScore:
    mode: str | None  # "decode" | "prompt" | None (not measured)
    tokens: list[Any] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    margins: list[float | None] = field(default_factory=list)
    error: str | None = None

    @property
    def logprob(self) -> float | None:
        if self.error or not self.token_logprobs:
            return None
        return math.fsum(self.token_logprobs)

    @property
    def min_margin(self) -> float | None:
        if self.error or not self.margins or any(m is None for m in self.margins):
            return None
        return min(self.margins)  # type: ignore[type-var]

    def sample_fields(self) -> dict[str, Any]:
        """The `gold_*` fields of a samples.jsonl line."""
        ok = self.error is None
        return {
            "gold_mode": self.mode,
            "gold_logprob": self.logprob,
            "gold_tokens": list(self.tokens) if ok else None,
            "gold_token_logprobs": list(self.token_logprobs) if ok else None,
            "gold_margins": list(self.margins) if ok else None,
            "gold_min_margin": self.min_margin,
            "gold_error": self.error,
        }


def from_forced(score: Any) -> GoldScore:
    """From the engine's `ForcedScore` (decode mode)."""
    return GoldScore("decode", list(score.tokens), list(score.token_logprobs), list(score.margins))


def failed(mode: str | None, why: str) -> GoldScore:
    return GoldScore(mode, error=why)


def from_prompt_logprobs(logprobs: Any, answer_start: int, answer_end: int) -> GoldScore:
    """From a completions response's `logprobs` (echo=True): the tokens whose text starts within
    characters [answer_start, answer_end) of the echoed prompt are the answer's (the generated
    token after it is not)."""
    if logprobs is None:
        return failed("prompt", "the server returned no prompt log-probabilities (echo + logprobs)")
    if isinstance(logprobs, dict):
        get = logprobs.get
    else:
        get = lambda k: getattr(logprobs, k, None)  # noqa: E731
    tokens, lps, offsets, tops = get("tokens"), get("token_logprobs"), get("text_offset"), get("top_logprobs")
    if not tokens or lps is None or offsets is None:
        return failed("prompt", "the server's logprobs lack tokens, token_logprobs or text_offset")
    idx = [i for i, off in enumerate(offsets) if off is not None and answer_start <= off < answer_end]
    idx = [i for i in idx if i < len(lps)]
    if not idx:
        return failed("prompt", "the echoed prompt has no answer tokens (was the prompt echoed?)")
    out = GoldScore("prompt")
    for i in idx:
        lp = lps[i]
        if lp is None:
            return failed("prompt", f"no log-probability for answer token {i}")
        out.tokens.append(tokens[i])
        out.token_logprobs.append(float(lp))
        top = (tops[i] if tops and i < len(tops) else None) or {}
        others = [float(v) for k, v in top.items() if k != tokens[i]]
        # with top-2 log-probabilities the best other token is always among them
        out.margins.append(float(lp) - max(others) if len(top) >= 2 and others else None)
    return out
