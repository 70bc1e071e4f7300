"""The backend seam's state probe: one sequence at a time, in one state dtype, with every
position's logits and the stored recurrent state readable between calls.

`evalkit run` needs text back (`backends.base.Backend`); `evalkit drift` needs to look inside:
logits per position and each layer's state after a chunk. The local engine implements both
(`backends.local`, `backends.local_probe`); drift sees only these protocols, so its drivers are
tested on any recurrent model that implements them.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch


class ArmSession(Protocol):
    """One sequence's caches (KDA state pool in `state_dtype`, conv state, MLA KV) over shared weights."""

    state_dtype: str  # "fp32" | "fp16" | "bf16"

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens [T] as ONE prefill call continuing the sequence (the KDA state is read from
        and written back to the pool once, so rounded once); return fp32-or-wider logits [T, vocab]."""

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens [T] one at a time as decode steps (the state is rounded after every token);
        return logits [T, vocab]."""

    def states(self) -> list[torch.Tensor]:
        """The stored recurrent state of each KDA layer, [H, K, V] in the pool dtype."""

    def close(self) -> None:
        """Free the caches."""


class DriftModel(Protocol):
    """A loaded model that can open independent sessions over the same weights."""

    vocab_size: int
    device: torch.device

    def open_session(self, state_dtype: str) -> ArmSession: ...

    def describe(self) -> dict[str, Any]:
        """Model path, config hash, kernel build: for the manifest."""

    def tokenize(self, text: str) -> list[int]: ...
