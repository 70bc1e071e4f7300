"""Per-sample health flags: what makes a sample's result suspect rather than simply wrong.

- "nan" / "inf": a non-finite value in the logits or the recurrent state;
- "overflow": some |state| reached `overflow_threshold` (default 32768: one more doubling
  exceeds fp16's 65504), checked every `health_interval` decode steps and at the end of prefill;
- "repetition": the generation ends in a loop (the last max(32, 4p) tokens repeat with a period
  p <= 16), the usual failure of a degraded state."""

from __future__ import annotations

import math

import torch


def logit_flags(logits: torch.Tensor) -> list[set[str]]:
    """Flags per row of fp32 logits [B, V] (one device sync only when something is wrong)."""
    bad = ~torch.isfinite(logits).all(-1)
    flags: list[set[str]] = [set() for _ in range(logits.shape[0])]
    if bool(bad.any()):
        nan = torch.isnan(logits).any(-1).tolist()
        for i, b in enumerate(bad.tolist()):
            if b:
                flags[i].add("nan" if nan[i] else "inf")
    return flags


def state_flags(max_abs: float, threshold: float) -> set[str]:
    if math.isnan(max_abs):
        return {"nan"}
    if math.isinf(max_abs):
        return {"inf", "overflow"}
    return {"overflow"} if max_abs >= threshold else set()


def is_repetition(tokens: list[int], max_period: int = 16, min_span: int = 32, min_repeats: int = 4) -> bool:
    n = len(tokens)
    for p in range(1, max_period + 1):
        span = max(min_span, min_repeats * p)
        if span > n:
            break
        tail = tokens[n - span :]
        if all(tail[i] == tail[i - p] for i in range(p, span)):
            return True
    return False
