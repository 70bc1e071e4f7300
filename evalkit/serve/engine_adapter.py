"""The one place that knows the engine's method names (add_request/step/has_unfinished),
so the serving loop and the HTTP layer stay independent of the engine's internals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.serve.engine_loop import Finished


@dataclass
class StepResult:
    finished: dict[Any, Finished]
    decode_batch: int  # sequences advanced by a decode step (0 for a prefill step)


class EngineAdapter:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def add(self, prompt_ids: list[int], params: Any) -> Any:
        return self.engine.add_request(prompt_ids, params)

    def has_unfinished(self) -> bool:
        return bool(self.engine.has_unfinished())

    def step(self) -> StepResult:
        outputs, num_tokens = self.engine.step()
        finished = {
            o.request_id: Finished(text=o.text, token_ids=list(o.token_ids), finish_reason=o.finish_reason,
                               n_prompt=o.n_prompt, n_generated=o.n_generated, flags=list(o.flags))
            for o in outputs
        }
        return StepResult(finished, -num_tokens if num_tokens < 0 else 0)

    def partial_tokens(self, rid: Any) -> list[int] | None:
        fn = getattr(self.engine, "partial_token_ids", None)
        return fn(rid) if fn else None

    def reset(self) -> None:
        fn = getattr(self.engine, "reset", None)
        if fn:
            fn()
