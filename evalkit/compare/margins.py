"""`--margin`: one non-inferiority margin for every row, per-task margins, or both.

`0.01`, `gsm8k=0.02,passkey=0.05`, or `0.01,gsm8k=0.02` (the plain number is the default for
tasks not named). Margins are fractions: 0.01 is one percentage point.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from evalkit.errors import InputError

DEFAULT_MARGIN = 0.01


@dataclass(frozen=True)
class Margins:
    default: float = DEFAULT_MARGIN
    per_task: dict[str, float] = field(default_factory=dict)

    def for_task(self, task: str) -> float:
        return self.per_task.get(task, self.default)


def _fraction(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--margin: {what} must be a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise InputError(f"--margin must be a fraction in (0, 1), e.g. 0.01 for 1 pp; got {text} for {what}")
    return value


def parse_margins(text: str | float) -> Margins:
    if isinstance(text, (int, float)):
        return Margins(_fraction(str(text), "the margin"))
    default, per_task = DEFAULT_MARGIN, {}
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise InputError("--margin is empty; give e.g. 0.01 or gsm8k=0.02,passkey=0.05")
    plain = 0
    for item in items:
        if not item:
            raise InputError(f"--margin {text!r} has an empty item")
        task, eq, value = item.partition("=")
        if eq:
            task = task.strip()
            if not task:
                raise InputError(f"--margin item {item!r} names no task")
            if task in per_task:
                raise InputError(f"--margin names task {task!r} twice")
            per_task[task] = _fraction(value.strip(), f"task {task!r}")
        else:
            plain += 1
            if plain > 1:
                raise InputError(f"--margin {text!r} has more than one default (items without TASK=)")
            default = _fraction(item, "the margin")
    return Margins(default, per_task)


def check_tasks(margins: Margins, tasks: list[str]) -> None:
    """InputError for a `--margin TASK=...` naming a task not compared, with the likeliest meant."""
    unknown = sorted(set(margins.per_task) - set(tasks))
    if unknown:
        guesses = {u: difflib.get_close_matches(u, tasks, n=1) for u in unknown}
        meant = "; ".join(f"did you mean {g[0]!r} for {u!r}?" for u, g in guesses.items() if g)
        raise InputError(
            f"--margin names task(s) not in the comparison: {', '.join(unknown)} "
            f"(compared: {', '.join(tasks)})" + (f"; {meant}" if meant else "")
        )
