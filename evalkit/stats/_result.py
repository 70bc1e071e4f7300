"""A small base for statistics results: frozen, printable, convertible to a dict.

Every test and interval in `evalkit.stats` returns one of these (statsmodels style), so a user
can print it, read its fields, or put it in a JSON report with `.to_dict()`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 1e-4 or abs(value) >= 1e6):
            return f"{value:.4e}"
        return f"{value:.6f}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value)


@dataclasses.dataclass(frozen=True)
class Result:
    """Base class: subclasses are frozen dataclasses; `title` names the procedure."""

    def summary(self) -> str:
        lines = [self.title]
        for f in dataclasses.fields(self):
            if f.name == "note" and not getattr(self, f.name):
                continue
            lines.append(f"  {f.name:<18} {_fmt(getattr(self, f.name))}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    @property
    def title(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
