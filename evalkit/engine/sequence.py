"""A request as the scheduler sees it: its tokens, where its state lives, and how far it got."""

from __future__ import annotations

import itertools
import time
from enum import Enum

from .sampling import SamplingParams


class Status(Enum):
    WAITING = "waiting"  # not admitted: no slot yet
    PREFILL = "prefill"  # admitted, prompt not fully in the state
    DECODE = "decode"  # generating one token per step
    FINISHED = "finished"


class Sequence:
    _ids = itertools.count()

    def __init__(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        request_id: int | None = None,
        score_from: int | None = None,
    ):
        self.seq_id = next(Sequence._ids)
        self.request_id = self.seq_id if request_id is None else request_id
        self.token_ids: list[int] = list(prompt_ids)
        self.n_prompt = len(prompt_ids)
        self.params = params
        self.status = Status.WAITING
        self.slot: int | None = None
        self.block_table: list[int] = []
        self.num_computed = 0  # tokens already folded into the state / cache
        self.finish_reason: str | None = None
        self.flags: set[str] = set()
        self.state_max_abs = 0.0
        self.state_layer_max_abs: list[float] = []  # per KDA layer, over the sequence's life
        self.state_nonfinite = 0  # the most non-finite state elements seen at one health check
        # scoring (loglikelihood): logits wanted for positions score_from-1 .. n_prompt-2
        self.score_from = score_from
        self.logprob = 0.0
        self.is_greedy = True
        # teacher forcing in decode mode (evalkit.engine.forced): the answer fed token by token
        self.forced: list[int] | None = None
        self.forced_score = None
        # a generation request may carry an answer to teacher-force from its post-prompt state:
        # at admission it reserves a second slot (and cache blocks); when its prompt is in, the
        # state is copied there and a forced sequence (request id fork_request_id) continues
        self.fork_answer: list[int] | None = None
        self.fork_request_id: int | None = None
        self.fork_slot: int | None = None
        self.fork_blocks: list[int] = []
        # sampling: the coupled randomness' seed; log-probabilities when the request asks for them
        self.sample_seed = None if params.greedy else params.request_seed()
        self.logprobs = [] if params.logprobs is not None else None
        self.prompt_logprobs = [None] if params.prompt_logprobs is not None else None
        self.t_arrival = time.perf_counter()
        self.t_first_token: float | None = None

    @property
    def is_scoring(self) -> bool:
        return self.score_from is not None

    @property
    def n_generated(self) -> int:
        return len(self.token_ids) - self.n_prompt

    @property
    def generated(self) -> list[int]:
        return self.token_ids[self.n_prompt :]

    @property
    def fork_len(self) -> int:
        """Tokens the forked forced sequence may hold (0 without a fork)."""
        return 0 if self.fork_answer is None else self.n_prompt + len(self.fork_answer)

    @property
    def max_len(self) -> int:
        """Tokens this sequence may hold at most (its MLA cache reservation)."""
        return self.n_prompt + (0 if self.is_scoring else self.params.max_new_tokens)

    def __repr__(self) -> str:
        return f"Sequence(id={self.seq_id}, status={self.status.value}, n={len(self.token_ids)})"
