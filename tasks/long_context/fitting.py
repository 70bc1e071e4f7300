"""Size a generated prompt to a target length in the evaluated model's tokens.

`fit_units` searches the haystack unit count n so that the exact token count of the final
prompt (chat template included when used) is <= target and >= (1 - tol) * target. Token
counts grow almost linearly in n, so instead of bisecting blindly (about 17 full
tokenizations at 128k) it interpolates between exactly counted points, aiming half the
tolerance under the target. The rate of tokens per unit comes from an exact count of a
calibration prompt (1/16 of the target, at least 8k tokens, at most a quarter), so the first
full-size guess usually lands in the window: one full tokenization per prompt where the
character-based first guess took two. Every count is exact (the real tokenizer on the real
final string), so the result never relies on an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.errors import InputError

# the calibration prompt: target / 16 tokens, at least 8k (its rate must be within ~1% to land
# the guess in a 2% window) and at most a quarter of the target
CALIBRATION_FRACTION = 16
CALIBRATION_MIN_TOKENS = 8192
MIN_CALIBRATION_UNITS = 32  # below this many units the character-based guess is as good


class LengthError(InputError):
    """A target length the task cannot be built for (too short for its fixed parts)."""


@dataclass
class Fit:
    n: int
    text: str
    length: int
    evaluations: int


def fit_units(
    build: Callable[[int], str],
    count: Callable[[str], int],
    target: int,
    *,
    n_min: int = 1,
    n_max: int | None = None,
    tol: float = 0.02,
    first_guess: int | None = None,
    what: str = "prompt",
) -> Fit:
    """The unit count n (n_min <= n <= n_max) whose prompt `build(n)` fits `target` tokens.

    Assumes count(build(n)) is non-decreasing in n. Returns the first n found inside the
    window [(1 - tol) * target, target], or the largest fitting n seen when no n lands in it
    (units too coarse), which callers check against the tolerance.
    """
    counts: dict[int, int] = {}
    texts: dict[int, str] = {}

    def evaluate(n: int) -> int:
        if n not in counts:
            texts[n] = build(n)
            counts[n] = count(texts[n])
        return counts[n]

    floor = math.ceil((1 - tol) * target)
    aim = target - max(1, int(0.5 * tol * target))
    c_lo = evaluate(n_min)
    if c_lo > target:
        raise LengthError(f"{what} needs {c_lo} tokens with the least haystack; target {target} is too small")
    lo, hi = n_min, None  # lo fits; hi (if known) does not
    if first_guess is None:
        # first jump from character counts (no extra tokenization): chars per unit from a
        # built-but-uncounted probe, chars per token from the minimal prompt
        probe = n_min + 16 if n_max is None else min(n_min + 16, n_max)
        chars_per_unit = (len(build(probe)) - len(texts[n_min])) / max(probe - n_min, 1)
        tokens_per_unit = max(chars_per_unit / max(len(texts[n_min]) / max(c_lo, 1), 1e-3), 1e-3)
        first_guess = n_min + int((aim - c_lo) / tokens_per_unit)
        # calibrate the rate on an exact count of a shorter prompt (worth it for long prompts)
        cal_tokens = min(target / 4, max(target / CALIBRATION_FRACTION, CALIBRATION_MIN_TOKENS))
        n_cal = n_min + int((cal_tokens - c_lo) / tokens_per_unit)
        if n_cal >= n_min + MIN_CALIBRATION_UNITS and (n_max is None or n_cal < n_max):
            c_cal = evaluate(n_cal)
            if c_lo < c_cal < target:
                first_guess = n_cal + int((aim - c_cal) * (n_cal - n_min) / (c_cal - c_lo))
    n = max(first_guess, n_min + 1)
    if n_max is not None:
        n = min(n, n_max)
    for _ in range(60):
        if n_max is not None and lo >= n_max:
            break
        c = evaluate(n)
        if c <= target:
            lo = max(lo, n)
        else:
            hi = n if hi is None else min(hi, n)
        if counts[lo] >= floor:
            break
        if hi is not None and hi - lo <= 1:
            break
        # next guess: interpolate between the nearest counted points around the aim
        below = max((m for m in counts if counts[m] <= aim and m >= lo), default=lo)
        above = [m for m in counts if counts[m] > aim]
        if above:
            a = min(above)
            rate = (counts[a] - counts[below]) / max(a - below, 1)
        else:
            pts = sorted(counts)
            a = pts[-1]
            p = pts[-2] if len(pts) > 1 else pts[-1]
            rate = (counts[a] - counts[p]) / max(a - p, 1)
        rate = max(rate, 1e-3)
        step = (aim - counts[below]) / rate
        n = below + max(1, int(step))
        if hi is None:
            n = min(n, 4 * lo + 64)  # bounded growth while no upper bracket is known
        if hi is not None:
            n = min(n, hi - 1)
        if n <= lo:
            n = lo + 1
        if n_max is not None:
            n = min(n, n_max)
        if n in counts:  # stalled: bisect the bracket instead
            n = (lo + hi) // 2 if hi is not None else 2 * lo + 1
            if n in counts or n <= lo:
                break
    return Fit(lo, texts[lo], counts[lo], len(counts))
