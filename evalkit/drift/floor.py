"""The A/A arm: fp32 against fp32 computed another, equally valid way: the study's noise floor.

Two fp32-state runs over the same tokens differ only by floating-point reassociation when their
work is cut differently, so their divergence is the floor any state format's divergence has to be
read against ("fp16's KL is 12x the floor at 64k", not a bare number). The A/A session feeds
every block the drivers hand it as `pieces` consecutive calls instead of one:
- prefill mode: prefill chunks of half the size, so the chunked KDA recurrence stores the state
  at other points and sums its intra-/inter-chunk terms in another order (always a nonzero floor
  once a second chunk reads the first one's state);
- decode mode: the state is stored after every token in both runs (in fp32, exactly), and only
  the batch composition of the dense layers (projections, MoE, MLA) changes: matmul kernels
  chosen per batch shape reassociate their sums (a nonzero floor on the CPU engine too, ~1e-13
  KL on the tiny checkpoints).
An fp32 arm with the same cut (`--arms fp32`) is the identity check: exactly 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from evalkit.drift.session import ArmSession, DriftModel

AA_ARM = "fp32-aa"  # the label of the A/A arm in every table
AA_PIECES = 2
AA_HOW = (
    "fp32 state computed with each prefill chunk / decode block cut in two "
    "(other store points, other batch shapes)"
)


class SplitSession:
    """An fp32 session fed in `pieces` calls per block (see the module doc)."""

    def __init__(self, inner: ArmSession, pieces: int = AA_PIECES):
        if pieces < 1:
            raise ValueError(f"pieces must be >= 1, got {pieces}")
        self.inner, self.pieces = inner, pieces
        self.state_dtype = inner.state_dtype

    def _split(self, feed: Callable[[torch.Tensor], torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
        n = int(tokens.numel())
        size = max(1, -(-n // self.pieces))
        return torch.cat([feed(tokens[s : s + size]) for s in range(0, n, size)])

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._split(self.inner.prefill, tokens)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._split(self.inner.decode, tokens)

    def states(self) -> list[torch.Tensor]:
        return self.inner.states()

    def close(self) -> None:
        self.inner.close()


def session_opener(model: DriftModel, pieces: int = AA_PIECES) -> Callable[[str], ArmSession]:
    """`open_session` for the drivers: the A/A label opens a split fp32 session, any other label
    the model's own session in that state format."""

    def open_session(arm: str) -> ArmSession:
        if arm == AA_ARM:
            return SplitSession(model.open_session("fp32"), pieces)
        return model.open_session(arm)

    return open_session
