"""The A/A arm: fp32 against fp32 computed another, equally valid way: the study's noise floor.

Two fp32-state runs over the same tokens differ only by floating-point reassociation when their
work is cut differently, so their divergence is the floor any state format's divergence has to be
read against ("fp16's KL is 12x the floor at 64k", not a bare number). The A/A session feeds
every block the drivers hand it (a prefill chunk, or a decode block) as two calls, cut
`AA_OFFSET` tokens before the middle so the cut is off any power-of-two grid:
- the state is stored to the pool (in fp32: exactly) at one more point per block;
- the chunked KDA prefill kernel (GPU) then tiles its 64-token sub-chunks on a shifted grid, which
  reassociates the intra-/inter-chunk sums;
- the dense layers (projections, MoE, MLA) run on other batch shapes, and matmul kernels chosen
  per shape may sum in another order.
What that gives is measured, not assumed: on the CPU engine the KDA recurrence is token by token
in both modes, so only the dense layers' batch shapes differ (a nonzero floor, ~1e-15 to 1e-13 KL
on the tiny checkpoints); on a toy whose per-row arithmetic does not depend on the batch it is
exactly 0 (tests/test_drift_study.py). An fp32 arm with the same cut (`--arms fp32`) is the
identity check: exactly 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from evalkit.backends.probe import ArmSession, DriftModel

AA_ARM = "fp32-aa"  # the label of the A/A arm in every table
AA_OFFSET = 24  # the cut sits this many tokens before the block's middle
AA_HOW = (
    "fp32 state computed with each prefill chunk / decode block cut in two off-grid "
    "(other store points, other kernel tiling, other batch shapes)"
)


class SplitSession:
    """An fp32 session fed each block in two calls (see the module doc)."""

    def __init__(self, inner: ArmSession, offset: int = AA_OFFSET):
        self.inner, self.offset = inner, offset
        self.state_dtype = inner.state_dtype

    def _cut(self, n: int) -> int:
        cut = n // 2 - self.offset
        return cut if cut >= 1 else n // 2

    def _split(self, feed: Callable[[torch.Tensor], torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
        cut = self._cut(int(tokens.numel()))
        if cut < 1:
            return feed(tokens)
        return torch.cat([feed(tokens[:cut]), feed(tokens[cut:])])

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._split(self.inner.prefill, tokens)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._split(self.inner.decode, tokens)

    def states(self) -> list[torch.Tensor]:
        return self.inner.states()

    def close(self) -> None:
        self.inner.close()


def session_opener(model: DriftModel, offset: int = AA_OFFSET) -> Callable[[str], ArmSession]:
    """`open_session` for the drivers: the A/A label opens a split fp32 session, any other label
    the model's own session in that state format."""

    def open_session(arm: str) -> ArmSession:
        if arm == AA_ARM:
            return SplitSession(model.open_session("fp32"), offset)
        return model.open_session(arm)

    return open_session
