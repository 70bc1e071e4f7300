"""Terminal rendering of the comparison: the same cells as the Markdown table, drawn by rich for a
person reading `compare` in a terminal (Markdown stays the format for files and pipes)."""

from __future__ import annotations

import io
from typing import Any

from evalkit.compare.clustered import clustered_line
from evalkit.compare.markdown import table_cells
from evalkit.compare.verdict import LOSS


def render_terminal(report: dict[str, Any], *, width: int | None = None, color: bool = True) -> str:
    """The rows as a rich table, then the verdict in words and the report's notes, as terminal text."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    head, align, body = table_cells(report)
    table = Table(box=box.SIMPLE_HEAD, title=f"compare: {report['outcome']}")
    for name, how in zip(head, align):
        table.add_column(name, justify="right" if how.endswith(":") else "left")
    for cells in body:
        table.add_row(*cells, style="bold red" if cells[-1] == LOSS else None)
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, color_system="standard" if color else None)
    console.print(table)
    console.print(report["verdict"], highlight=False, markup=False)
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
    for row in report.get("clustered") or []:  # sampled runs (evalkit.compare.clustered)
        console.print(clustered_line(row), highlight=False, markup=False)
    return buf.getvalue()
