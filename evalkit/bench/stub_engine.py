"""An engine without a model, for measuring everything of `evalkit run` that is not the engine.

A long-context run's end-to-end prompt throughput is the engine's prefill rate minus whatever the
pipeline around it costs: building or reading the docs, tokenizing prompts, hashing, writing
samples, scoring, progress. This engine takes requests exactly as `LLMEngine` does (the same
`encode` and `Sequence`, so the per-request copies are the real ones) and answers each one in a
single step with canned tokens, so a run's wall time is that pipeline cost alone, measurable on a
CPU box (`scripts/bench_long_context_run.py --stub`). Its answers are deterministic.

`prefill_tok_s` makes each step also sleep as long as a GPU of that prefill rate would take over the
prompt: the CPU stays free, as it does while a GPU prefills, so the overlap of document building
with the engine's work can be measured on a CPU box (`--stub-tok-s`)."""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Any

CANNED = " 12345"  # every generation's text (before stop strings): an answer-shaped string


class StubEngine:
    """`LLMEngine`'s request API (add_request, forced_request_id, has_unfinished, step, stats)."""

    def __init__(
        self, tokenizer: Any, max_model_len: int = 1 << 20, prefill_tok_s: float | None = None
    ) -> None:
        from types import SimpleNamespace

        self.tokenizer = tokenizer
        self.prefill_tok_s = prefill_tok_s
        self.config = SimpleNamespace(max_model_len=max_model_len)
        self._ids = itertools.count()
        self._waiting: deque[Any] = deque()
        self._fork_ids: dict[int, int] = {}
        self._canned = [int(t) for t in tokenizer.encode(CANNED, add_special_tokens=False)]
        self.stats = {"prefill_tokens": 0, "prefill_s": 0.0, "decode_tokens": 0, "decode_s": 0.0}

    def describe(self) -> dict[str, Any]:
        return {"engine": "stub", "note": "no model: canned answers, for pipeline benchmarks"}

    def encode(self, prompt: Any) -> list[int]:
        from evalkit.engine.llm_engine import LLMEngine

        return LLMEngine.encode(self, prompt)  # the real engine's rule (and its cost)

    def add_request(self, prompt: Any, params: Any = None, request_id: Any = None, forced_answer: Any = None):
        from evalkit.engine.sampling import SamplingParams
        from evalkit.engine.sequence import Sequence

        rid = next(self._ids) if request_id is None else request_id
        seq = Sequence(self.encode(prompt), params or SamplingParams(), request_id=rid)
        if forced_answer is not None:
            seq.fork_answer = [int(t) for t in forced_answer]
            seq.fork_request_id = next(self._ids)
            self._fork_ids[rid] = seq.fork_request_id
        self._waiting.append(seq)
        return rid

    def forced_request_id(self, request_id: int) -> int | None:
        return self._fork_ids.get(request_id)

    def has_unfinished(self) -> bool:
        return bool(self._waiting)

    def step(self) -> Any:
        """One request "prefilled" and answered (and its forced answer scored, when it has one)."""
        from evalkit.engine.forced import ForcedScore
        from evalkit.engine.sampling import Output
        from evalkit.engine.step_result import StepResult

        if not self._waiting:
            return StepResult()
        t0 = time.perf_counter()
        seq = self._waiting.popleft()
        gen = self._canned[: max(seq.params.max_new_tokens, 0)]
        text = self.tokenizer.decode(gen, skip_special_tokens=True)
        outs = [Output(seq.request_id, list(gen), text, "length", seq.n_prompt, len(gen))]
        if seq.fork_answer is not None:
            n = len(seq.fork_answer)
            forced = ForcedScore(tokens=list(seq.fork_answer))
            forced.token_logprobs, forced.margins = [-0.5] * n, [1.0] * n
            outs.append(Output(seq.fork_request_id, [], "", "length", seq.n_prompt, 0, forced=forced))
            self._fork_ids.pop(seq.request_id, None)
        if self.prefill_tok_s:
            time.sleep(seq.n_prompt / self.prefill_tok_s)
        self.stats["prefill_tokens"] += seq.n_prompt
        self.stats["prefill_s"] += time.perf_counter() - t0
        return StepResult(outs, prefilled_tokens=seq.n_prompt)
