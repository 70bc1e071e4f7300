"""`--plot`: FILE.png gets the forest plot; a directory (existing, or a path without a suffix)
gets DIR/forest.png and DIR/accuracy.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.compare.forest import render_forest
from evalkit.compare.plot_accuracy import render_accuracy_plot
from evalkit.errors import InputError


def render_plot(report: dict[str, Any], path: str | Path) -> list[Path]:
    """Write the plot(s); return the files written."""
    target = Path(path)
    if not (target.is_dir() or target.suffix == "" or str(path).endswith(("/", "\\"))):
        render_forest(report, target)
        return [target]
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write the plot to {target}: {exc.strerror or exc}") from None
    forest, accuracy = target / "forest.png", target / "accuracy.png"
    render_forest(report, forest)
    render_accuracy_plot(report, accuracy)
    return [forest, accuracy]
