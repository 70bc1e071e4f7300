"""Request parameters and results of the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import InputError


@dataclass
class SamplingParams:
    """Greedy decoding only (evaluation); `temperature` must stay 0."""

    max_new_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    min_tokens: int = 0
    stop_token_ids: list[int] = field(default_factory=list)
    temperature: float = 0.0

    def __post_init__(self):
        if self.temperature != 0.0:
            raise InputError("the engine decodes greedily; temperature must be 0")
        if self.max_new_tokens < 0 or self.min_tokens < 0:
            raise InputError("max_new_tokens and min_tokens must be >= 0")
        self.stop = [s for s in (self.stop or []) if s]


@dataclass
class Output:
    request_id: int
    token_ids: list[int]  # generated tokens only
    text: str  # decoded generation, cut before the first stop string
    finish_reason: str  # "stop" (stop string) | "eos" | "length"
    n_prompt: int
    n_generated: int
    flags: list[str] = field(default_factory=list)  # "nan", "inf", "overflow", "repetition"
    state_max_abs: float | None = None  # largest |recurrent state| seen for this sequence
    timings: dict[str, float] = field(default_factory=dict)
    forced: Any = None  # an evalkit.engine.forced.ForcedScore for a teacher-forced request
