"""The benefit side of a state format: the bytes a sequence's state takes, and how many sequences
of a given context fit in the memory this engine's pools were given.

A 16-bit state halves the recurrent state's bytes, but a sequence also holds its attention cache
(MLA latents or GQA keys/values, stored in the model dtype and growing with the context), so the
gain in concurrent sequences is smaller than 2x and shrinks as the context grows. The report states
both, so a reviewer weighs the accuracy cost against what the format actually buys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .state import StatePools

# the contexts a capacity is reported at: a long-context evaluation's usual lengths
CAPACITY_CONTEXTS = (32768, 131072)


@dataclass(frozen=True)
class Capacity:
    state_format: str
    state_bytes_per_sequence: int  # the recurrent state of every recurrent layer, in the pool's dtype
    conv_bytes_per_sequence: int  # the short convolutions' carried inputs (model dtype)
    cache_bytes_per_token: int  # the attention layers' cache per token (model dtype)
    block_size: int  # the attention cache is allocated in blocks of this many tokens
    pool_budget_bytes: int | None  # the pools' memory on this GPU; None on the CPU (no fixed budget)
    contexts: tuple[int, ...] = CAPACITY_CONTEXTS

    def bytes_per_sequence(self, context: int) -> int:
        """One sequence's state, conv inputs and attention cache at `context` tokens."""
        blocks = -(-context // self.block_size) if self.cache_bytes_per_token else 0
        return (
            self.state_bytes_per_sequence
            + self.conv_bytes_per_sequence
            + blocks * self.block_size * self.cache_bytes_per_token
        )

    def max_sequences(self, context: int) -> int | None:
        """Most sequences of `context` tokens that fit in the pool budget (one slot is scratch)."""
        if self.pool_budget_bytes is None:
            return None
        return max(self.pool_budget_bytes // self.bytes_per_sequence(context) - 1, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_format": self.state_format,
            "state_bytes_per_sequence": self.state_bytes_per_sequence,
            "conv_bytes_per_sequence": self.conv_bytes_per_sequence,
            "cache_bytes_per_token": self.cache_bytes_per_token,
            "block_size": self.block_size,
            "pool_budget_bytes": self.pool_budget_bytes,
            "per_context": {
                str(ctx): {
                    "bytes_per_sequence": self.bytes_per_sequence(ctx),
                    "max_sequences": self.max_sequences(ctx),
                }
                for ctx in self.contexts
            },
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Capacity:
        """Read back a manifest's record (`InputError`-free: the caller checks the keys it needs)."""
        return cls(
            state_format=str(d["state_format"]),
            state_bytes_per_sequence=int(d["state_bytes_per_sequence"]),
            conv_bytes_per_sequence=int(d["conv_bytes_per_sequence"]),
            cache_bytes_per_token=int(d["cache_bytes_per_token"]),
            block_size=int(d["block_size"]),
            pool_budget_bytes=None if d.get("pool_budget_bytes") is None else int(d["pool_budget_bytes"]),
            contexts=tuple(int(c) for c in d.get("per_context", {}) or CAPACITY_CONTEXTS),
        )


def plan_capacity(
    arch: Any,
    state_format: str,
    state_dtype: torch.dtype,
    model_dtype: torch.dtype,
    block_size: int,
    pool_budget_bytes: int | None,
    contexts: tuple[int, ...] = CAPACITY_CONTEXTS,
) -> Capacity:
    """The capacity of an engine whose pools store the state as `state_dtype` (the format's pool
    dtype: fp8 formats take one byte, simulated mantissa widths an fp32 pool)."""
    return Capacity(
        state_format=state_format,
        state_bytes_per_sequence=StatePools.state_bytes_per_slot(arch, state_dtype),
        conv_bytes_per_sequence=StatePools.conv_bytes_per_slot(arch, model_dtype),
        cache_bytes_per_token=StatePools.bytes_per_token(arch, model_dtype),
        block_size=block_size,
        pool_budget_bytes=pool_budget_bytes,
        contexts=tuple(contexts),
    )
