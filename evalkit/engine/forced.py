"""Teacher forcing in decode mode: the log-probability of a given answer, token by token, with each
answer token fed as a decode step, so the recurrent state is stored (rounded) exactly where
generation stores it: once per prefill chunk of the prompt, then after every answer token.

`LLMEngine.loglikelihood` scores a continuation in prefill mode (the continuation is read as part
of the prompt, rounded once per chunk); on an fp32 state the two agree to float error, on a 16-bit
state they differ, and decode mode is the one that measures what generation suffers.

Two ways in: `LLMEngine.add_forced_request` prefills the prompt itself; a generation request made
with `add_request(..., forced_answer=...)` forks instead: when its prompt is in, its state (KDA
state, conv state, MLA cache rows) is copied to a reserved slot and the answer is forced from
there, so the measure costs no second prefill. Both give the same numbers: the state after a prompt
does not depend on the batch (batch invariance), and the copy is exact.

Per answer token i the engine records log p(a_i | prompt, a_<i) and the greedy margin
logit(a_i) - max_{t != a_i} logit(t): positive exactly when greedy decoding would produce a_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
    """(log p(target), greedy margin) of each row of `logits` [n, vocab] for `targets` [n].

    In float64: a confident model's log p is -sum_j exp(l_j - l_target), about -1e-6 for a margin
    of 14 nats; fp32 rounds it to a few representable values near 0 and two arms whose logits
    differ would often tie exactly. (Margins are logit differences: not saturated either way.)"""
    logits = logits.double()
    picked = logits.gather(1, targets[:, None])[:, 0]
    logp = picked - torch.logsumexp(logits, dim=-1)
    others = logits.scatter(1, targets[:, None], float("-inf"))
    margin = picked - others.max(dim=-1).values
    both = torch.stack([logp, margin]).cpu()
    return both[0].tolist(), both[1].tolist()


def copy_sequence_state(state: Any, runner: Any, src: Any, dst: Any) -> None:
    """Copy everything `src` has folded in (KDA and conv state of its slot, its MLA cache rows) to
    `dst`, whose slot and blocks are allocated; `dst` then continues from the same point."""
    for pools in (state.kda, state.conv):
        for pool in pools.values():
            pool[dst.slot].copy_(pool[src.slot])
    runner.bind(dst)
    if state.mla and src.num_computed:
        rows_src = runner._rows(src.slot, 0, src.num_computed)
        rows_dst = runner._rows(dst.slot, 0, src.num_computed)
        for pool in state.mla.values():
            pool[rows_dst] = pool[rows_src]
