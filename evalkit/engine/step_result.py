"""`StepResult`: what one engine step did, for the loops that drive the engine step by step."""

from __future__ import annotations

from dataclasses import dataclass, field

from .sampling import Output


@dataclass(frozen=True)
class StepResult:
    """The requests finished in the step, and its work: a prefill step processes
    `prefilled_tokens` prompt tokens, a decode step advances `decoded_sequences` sequences one
    token each (the other count is 0; both are 0 when there was nothing to do)."""

    outputs: list[Output] = field(default_factory=list)
    prefilled_tokens: int = 0
    decoded_sequences: int = 0
