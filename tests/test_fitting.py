"""`fit_units`: every prompt lands in the tolerance window on exact counts, and a calibration count
on a shorter prompt makes one full-size count enough when tokens grow linearly in the units."""

from __future__ import annotations

import random

import pytest

from evalkit.tasks.long_context.fitting import LengthError, fit_units


def linear_task(seed: int, fixed: int = 120):
    """A prompt of `fixed` tokens plus n units of 3-9 tokens each (a seeded draw per unit)."""
    rng = random.Random(seed)
    sizes = [rng.randint(3, 9) for _ in range(200_000)]

    def build(n: int) -> str:
        return "q " * fixed + " ".join("w" * s for s in sizes[:n])

    def count(text: str) -> int:
        calls.append(len(text))
        return text.count("q ") + sum(len(w) for w in text.replace("q ", "").split())

    calls: list[int] = []
    return build, count, calls


@pytest.mark.parametrize("target", [4096, 32768, 131072])
def test_linear_prompts_fit_mostly_with_one_full_count(target):
    """Every fit lands in the window; past ~32 calibration units most need one full-size count
    (the character-based first guess alone took two: the test fails without the calibration)."""
    full_counts = []
    for seed in range(10):
        build, count, calls = linear_task(seed)
        fit = fit_units(build, count, target, tol=0.02)
        assert 0.98 * target <= fit.length <= target
        assert count(fit.text) == fit.length
        calls.pop()
        full_counts.append(sum(c > len(fit.text) / 2 for c in calls))
    assert max(full_counts) <= 3, full_counts
    if target >= 32768:
        assert sum(full_counts) <= 13, full_counts


def test_nonlinear_prompts_still_fit_exactly():
    """Tokens per unit growing with n (a calibration on a shorter prompt under-reads the rate)."""

    def build(n: int) -> str:
        return " ".join(str(i) for i in range(n))

    def count(text: str) -> int:
        return len(text) // 2

    for target in (8192, 65536):
        fit = fit_units(build, count, target, tol=0.02)
        assert 0.98 * target <= fit.length <= target
        assert count(build(fit.n)) == fit.length


def test_a_target_below_the_fixed_parts_is_refused():
    build, count, _ = linear_task(0, fixed=500)
    with pytest.raises(LengthError, match="too small"):
        fit_units(build, count, 400)
