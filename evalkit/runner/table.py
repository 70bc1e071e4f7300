"""The end-of-run table: per task, metric and length, n, accuracy ± stderr and errors; and, when a
task scores a fraction per question (the decode-heavy tasks: items right), the mean score, since
an all-items exact match of 0 says little about a 32-item answer."""

from __future__ import annotations

import io
from typing import Any


def _length_order(key: str) -> tuple[int, int]:
    """Lengths ascending, then "all" (as summary.json orders them)."""
    return (0, int(key)) if key.isdigit() else (1, 0)


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten summary.json ({task: {metric: {length|"all": {n, accuracy, stderr, errors}}}})."""
    rows = []
    for task in sorted(summary):
        for metric in sorted(summary[task]):
            cells = summary[task][metric]
            for length in sorted(cells, key=lambda k: _length_order(str(k))):
                c = cells[length]
                rows.append(
                    {
                        "task": task,
                        "metric": metric,
                        "length": str(length),
                        "n": c.get("n", 0),
                        "accuracy": c.get("accuracy"),
                        "stderr": c.get("stderr"),
                        "errors": c.get("errors", 0),
                        "mean_score": c.get("mean_score"),
                    }
                )
    return rows


def _fmt(x: Any, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def render_summary(summary: dict[str, Any], *, title: str = "", width: int = 100) -> str:
    """A readable table (rich, no colour) as a string."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    rows = summary_rows(summary)
    # a fractional score differs from the exact-match accuracy only for item-scored tasks
    scored = any(r["mean_score"] is not None and r["mean_score"] != r["accuracy"] for r in rows)
    table = Table(title=title or None, show_lines=False, box=box.SIMPLE_HEAD)
    columns = [
        ("task", "left"),
        ("metric", "left"),
        ("length", "right"),
        ("n", "right"),
        ("accuracy", "right"),
        ("± stderr", "right"),
        ("errors", "right"),
    ]
    if scored:
        columns.insert(6, ("items right", "right"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for r in rows:
        cells = [r["task"], r["metric"], r["length"], str(r["n"]), _fmt(r["accuracy"]), _fmt(r["stderr"])]
        if scored:
            cells.append(_fmt(r["mean_score"]))
        table.add_row(*cells, str(r["errors"]))
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False).print(table)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()).strip("\n")
