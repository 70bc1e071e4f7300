"""Sampled runs: k samples per question at temperature T, with coupled randomness.

Sample j of a question gets the seed hash(sampling seed, task, doc ids, length, j): both arms
derive the same seed, and the engine's Gumbel-max sampler keys its uniforms by (seed, generated
position, token), so identical logits draw identical tokens (the decision protocol's coupled
sampling) while questions and samples stay independent of each other. A server gets the same
seed per request; only a server with the same sampler (`evalkit serve`) is coupled by it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from evalkit.backends.base import COUPLED, UNCOUPLED, RequestSampling
from evalkit.errors import InputError

__all__ = ["COUPLED", "UNCOUPLED", "SamplingSpec"]


@dataclass(frozen=True)
class SamplingSpec:
    """What a sampled run draws; all of it is the run's identity (`manifest["sampling"]`)."""

    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    samples: int = 1  # per question
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise InputError(f"--temperature must be a positive number (got {self.temperature})")
        if not (math.isfinite(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise InputError(f"--top-p must lie in (0, 1] (got {self.top_p})")
        if self.top_k < 0:
            raise InputError(f"--top-k must be 0 (off) or more (got {self.top_k})")
        if self.samples < 1:
            raise InputError(f"--samples-per-question must be at least 1 (got {self.samples})")
        if not 0 <= self.seed < 2**63:
            raise InputError(f"--sampling-seed must lie in [0, 2**63) (got {self.seed})")

    def request(self, task: str, doc_ids: list[Any], length: int | None, sample: int) -> RequestSampling:
        """The backend's sampling of one question's sample `sample` (its derived seed)."""
        key = json.dumps([self.seed, task, [str(d) for d in doc_ids], length, sample])
        seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1  # 63 bits
        return RequestSampling(self.temperature, self.top_p, self.top_k, seed)

    def describe(self, coupling: str) -> dict[str, Any]:
        """The manifest's `sampling` entry; `coupling` says whether the backend's sampler couples
        two arms given the same seeds (not identity: it follows from the backend)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "samples_per_question": self.samples,
            "seed": self.seed,
            "coupling": coupling,
        }
