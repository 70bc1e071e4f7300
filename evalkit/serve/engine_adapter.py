"""The one place that knows the engine's serving surface (`add_request`, `step`,
`has_unfinished`, its stats and scheduler), so the loop and the HTTP layer stay independent of
the engine's internals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.serve.engine_loop import Finished


@dataclass
class StepResult:
    """The loop's view of one engine step: the finished requests as serving records."""

    finished: dict[Any, Finished]
    decode_batch: int  # sequences advanced by this step if it was a decode step, else 0


class EngineAdapter:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def add(self, prompt_ids: list[int], params: Any) -> Any:
        return self.engine.add_request(prompt_ids, params)

    def abort(self, request_id: Any) -> None:
        """Drop an unfinished request: the engine frees its slot and zeroes its state."""
        self.engine.abort(request_id)

    def num_waiting(self) -> int:
        """Requests admitted to the engine but waiting for a state slot (read from any thread)."""
        scheduler = getattr(self.engine, "scheduler", None)
        return len(getattr(scheduler, "waiting", ()))

    def has_unfinished(self) -> bool:
        return bool(self.engine.has_unfinished())

    def step(self) -> StepResult:
        step = self.engine.step()
        finished = {
            o.request_id: Finished(
                text=o.text,
                token_ids=list(o.token_ids),
                finish_reason=o.finish_reason,
                n_prompt=o.n_prompt,
                n_generated=o.n_generated,
                flags=list(o.flags),
                logprobs=o.logprobs,
                prompt_logprobs=o.prompt_logprobs,
                timings=dict(o.timings),
            )
            for o in step.outputs
        }
        return StepResult(finished, step.decoded_sequences)

    def partial_tokens(self, rids: set[Any]) -> dict[Any, list[int]]:
        """Tokens generated so far by the still-running requests among `rids` (for streaming)."""
        out = {}
        for rid in rids:
            toks = self.engine.partial_token_ids(rid)
            if toks is not None:
                out[rid] = list(toks)
        return out

    def partial_logprobs(self, rid: Any) -> list[Any] | None:
        """The log-probabilities of the tokens generated so far by a running request that asked for them."""
        return self.engine.partial_logprobs(rid)
