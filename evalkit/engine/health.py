"""Per-sample health flags: what makes a sample's result suspect rather than simply wrong.

- "nan" / "inf": a non-finite value in the logits or the recurrent state;
- "overflow": some |state| reached `overflow_threshold` (default: the arm's format max, e.g.
  65504 for fp16, 448 for fp8_e4m3, which saturates there; a non-finite state is one too),
  checked every `health_interval` decode steps, at the end of prefill and at the end;
- "repetition": the generation ends in a loop (the last max(32, 4p) tokens repeat with a period
  p <= 16), the usual failure of a degraded state."""

from __future__ import annotations

import math

import torch


def nonfinite_rows(logits: torch.Tensor) -> torch.Tensor:
    """[B] bool: rows of logits [B, V] holding a NaN or an infinity. One read of the logits (a
    row's min and max are NaN when it holds a NaN, and infinite when it holds an infinity), where
    `~isfinite(x).all(-1)` also writes and reads a [B, V] mask: a decode step's logits are
    [512, 163840] fp32, 335 MB."""
    lo, hi = torch.aminmax(logits, dim=-1)
    return ~(torch.isfinite(lo) & torch.isfinite(hi))


def logit_flags(logits: torch.Tensor) -> list[set[str]]:
    """Flags per row of fp32 logits [B, V] (one device sync only when something is wrong)."""
    bad = nonfinite_rows(logits)
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


def merge_layer_max(seen: list[float], now: list[float]) -> list[float]:
    """The per-layer largest |state| over a sequence's life: the larger of each layer's, NaN sticks."""
    if not seen:
        return list(now)
    return [a if a != a else (b if b != b else max(a, b)) for a, b in zip(seen, now)]


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
