"""Teacher forcing in decode mode: the log-probability of a given answer, token by token, with each
answer token fed as a decode step, so the recurrent state is stored (rounded) exactly where
generation stores it: once per prefill chunk of the prompt, then after every answer token.

`LLMEngine.loglikelihood` scores a continuation in prefill mode (the continuation is read as part
of the prompt, rounded once per chunk); on an fp32 state the two agree to float error, on a 16-bit
state they differ, and decode mode is the one that measures what generation suffers.

Per answer token i the engine records log p(a_i | prompt, a_<i) and the greedy margin
logit(a_i) - max_{t != a_i} logit(t): positive exactly when greedy decoding would produce a_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class ForcedScore:
    """The decode-mode scores of one answer (one entry per answer token)."""

    tokens: list[int]
    token_logprobs: list[float] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)

    @property
    def logprob(self) -> float:
        """log p(answer | prompt): the sum over answer tokens (in float64)."""
        return math.fsum(self.token_logprobs)

    @property
    def min_margin(self) -> float:
        """The smallest greedy margin: > 0 iff greedy decoding reproduces the whole answer."""
        return min(self.margins)

    @property
    def greedy(self) -> bool:
        return self.min_margin > 0


def row_scores(logits: torch.Tensor, targets: torch.Tensor) -> tuple[list[float], list[float]]:
    """(log p(target), greedy margin) of each row of fp32 `logits` [n, vocab] for `targets` [n]."""
    logits = logits.float()
    picked = logits.gather(1, targets[:, None])[:, 0]
    logp = picked - torch.logsumexp(logits, dim=-1)
    others = logits.scatter(1, targets[:, None], float("-inf"))
    margin = picked - others.max(dim=-1).values
    both = torch.stack([logp, margin]).cpu()
    return both[0].tolist(), both[1].tolist()
