"""The family-wise procedure over a plan's loss claims (exact conditional McNemar p per cell).

- Holm (any dependence): the p-values are padded with p = 1 up to the plan's declared family size
  (hypotheses of the family not in this comparison), which can only make it more conservative.
- Fixed sequence (Maurer et al. 1995): the cells in the plan's pre-registered order, each at the
  full loss α, going on only after a rejection (a significant loss); the first non-rejection
  stops the sequence and every cell after it is "not tested". FWER <= α whatever the dependence,
  and more power than Holm for the cells early in the order (none for those after a stop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from evalkit import stats as st
from evalkit.stats._result import Result

HOLM, FIXED_SEQUENCE = "holm", "fixed-sequence"
TESTED, NOT_TESTED = "tested", "not tested"


@dataclass(frozen=True)
class LossFamily(Result):
    """Per hypothesis (in the caller's order): the adjusted p and whether it was tested."""

    procedure: str
    adjusted: tuple[float, ...]
    loss: tuple[bool, ...]  # a significant loss claimed after the adjustment
    status: tuple[str, ...]  # "tested" or "not tested" (after a fixed sequence stopped)
    stopped_at: str | None  # fixed sequence: the cell whose non-rejection ended it
    title: ClassVar[str] = "Loss claims over the plan's family"


def loss_family(
    names: Sequence[str],
    pvalues: Sequence[float],
    losing: Sequence[bool],
    alpha: float,
    *,
    procedure: str = HOLM,
    size: int | None = None,
    order: Sequence[str] = (),
) -> LossFamily:
    """names: each hypothesis' cell; losing: whether its estimate points to a loss (a two-sided p
    rejects "no loss" only in that direction); order: the fixed sequence's cells, first first."""
    n = len(pvalues)
    if procedure == HOLM:
        padded = list(pvalues) + [1.0] * max(0, (size or n) - n)
        adjusted = tuple(st.holm(padded).adjusted[:n])
        loss = tuple(bool(lo and p <= alpha) for lo, p in zip(losing, adjusted))
        return LossFamily(HOLM, adjusted, loss, (TESTED,) * n, None)
    if procedure != FIXED_SEQUENCE:
        raise ValueError(f"unknown multiplicity procedure {procedure!r}")
    rank = {name: i for i, name in enumerate(order)}
    if any(name not in rank for name in names):
        raise ValueError("the fixed sequence's order does not name every hypothesis")
    # hypotheses of one cell (several metrics) keep their given order within the cell
    seq = sorted(range(n), key=lambda i: (rank[names[i]], i))
    adjusted, loss, status = [1.0] * n, [False] * n, [NOT_TESTED] * n
    running, stopped_at = 0.0, None
    for i in seq:
        running = max(running, pvalues[i])  # adjusted p of a fixed sequence: the running maximum
        adjusted[i] = running
        status[i] = TESTED
        if not (losing[i] and pvalues[i] <= alpha):
            stopped_at = names[i]
            break
        loss[i] = True
    return LossFamily(FIXED_SEQUENCE, tuple(adjusted), tuple(loss), tuple(status), stopped_at)
