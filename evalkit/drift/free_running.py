"""Free-running (greedy) comparison of an arm's generated tokens with the fp32 arm's.

Once two greedy generations differ at one token their contexts differ, so the usual per-token
comparison stops meaning anything: what is reported is where they first split, how much of the
rest still matches position by position, and whether the arm broke (health flags).
"""

from __future__ import annotations

from collections.abc import Sequence


def first_divergence(ref: Sequence[int], arm: Sequence[int]) -> int | None:
    """Index of the first generated token where the two differ (None if they never do)."""
    n = min(len(ref), len(arm))
    for i in range(n):
        if ref[i] != arm[i]:
            return i
    return None if len(ref) == len(arm) else n


def agreement_after(ref: Sequence[int], arm: Sequence[int], start: int | None) -> float | None:
    """Fraction of positions >= start with the same token in both (None without a divergence)."""
    n = min(len(ref), len(arm))
    if start is None or start >= n:
        return None
    same = sum(1 for i in range(start, n) if ref[i] == arm[i])
    return same / (n - start)


def repeated_loop(tokens: Sequence[int], max_period: int = 16, min_tail: int = 32) -> dict | None:
    """The periodic tail of a generation, if it is long enough to call a loop.

    A loop is a suffix where tokens[i] == tokens[i - p] for a period p <= max_period, covering at
    least max(min_tail, 4 p) tokens (e.g. '!!!!...' or a repeated phrase). Returns its period,
    start index and length, for the shortest period with the longest such suffix.
    """
    n = len(tokens)
    best = None
    for p in range(1, max_period + 1):
        if n <= p:
            break
        i = n - 1
        while i - p >= 0 and tokens[i] == tokens[i - p]:
            i -= 1
        run = (n - 1 - i) + p  # the suffix starting at i + 1 - p repeats with period p
        if run >= max(min_tail, 4 * p) and (best is None or run > best["length"]):
            best = {"period": p, "start": n - run, "length": run}
    return best


def health_flags(
    tokens: Sequence[int],
    *,
    nonfinite_logits: bool,
    state_max_abs: float,
    state_nonfinite: bool,
    fp16_max: float = 65504.0,
) -> list[str]:
    """Flags as the engine reports them: 'nan' (non-finite logits or state), 'overflow'
    (a state value at or past fp16's largest finite value), 'repetition' (a loop at the end)."""
    flags = []
    if nonfinite_logits or state_nonfinite:
        flags.append("nan")
    if state_max_abs >= fp16_max:
        flags.append("overflow")
    if repeated_loop(tokens) is not None:
        flags.append("repetition")
    return flags
