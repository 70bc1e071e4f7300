"""The learning rate and the short-to-long curriculum, both scheduled by the wall clock."""

from __future__ import annotations

from evalkit.refmodel.settings import Settings


def lr_at(s: Settings, step: int, frac_time: float) -> float:
    """Warm-up over steps, constant, then a linear decay over the last `decay_fraction` of time."""
    warm = min(1.0, (step + 1) / max(s.warmup_steps, 1))
    if frac_time <= 1 - s.decay_fraction:
        return s.lr * warm
    d = min(1.0, (frac_time - (1 - s.decay_fraction)) / s.decay_fraction)
    return s.lr * warm * (1 - d * (1 - s.min_lr_ratio))


def stage_at(s: Settings, frac_time: float) -> int:
    total = sum(s.stage_weights)
    acc = 0.0
    for i, w in enumerate(s.stage_weights):
        acc += w / total
        if frac_time < acc:
            return i
    return len(s.stages) - 1


class Curriculum:
    """The stage to train at time `now` (any clock: the loop passes time.time(), tests a fake one):
    by the fraction of the training span elapsed, but advancing at most one stage per step and not
    ending before the last stage had a step, so a slow machine (or a loaded CI box) shortens the
    stages instead of skipping one."""

    def __init__(self, s: Settings, start: float, end: float) -> None:
        self.s, self.start, self.end = s, start, end
        self.stage = -1

    def frac(self, now: float) -> float:
        return min(1.0, max(0.0, (now - self.start) / max(self.end - self.start, 1e-9)))

    def next(self, now: float) -> int | None:
        """The stage of the next step, or None when training is over."""
        last = len(self.s.stages) - 1
        if now >= self.end and self.stage >= last:
            return None
        self.stage = max(self.stage, min(stage_at(self.s, self.frac(now)), self.stage + 1))
        return self.stage
