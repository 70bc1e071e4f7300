"""The README's quoted outputs are what the code produces now: `evalkit tasks` (the rows shown and
the count it names)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from evalkit.cli import main as cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _block_after(command: str) -> list[str]:
    """The lines of the README's fenced block that starts with `$ <command>` (command line included)."""
    start = README.index(f"\n$ {command}")
    end = README.index("\n```", start)
    return README[start + 1 : end].splitlines()


def _cli(*argv: str, columns: int = 160) -> str:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setenv("COLUMNS", str(columns))
        assert cli(list(argv)) == 0
    return out.getvalue()


def test_the_task_list_is_the_one_evalkit_tasks_prints():
    block = _block_after("evalkit tasks")
    count = int(re.search(r"the first rows of (\d+)\)", block[0]).group(1))
    printed = _cli("tasks").splitlines()
    names = [line.split("│")[1].strip() for line in printed if re.match(r"│ \w", line)]
    from evalkit.tasks.registry import list_tasks

    assert count == len(names) == len(list_tasks()), (count, names)
    rows = [line for line in printed if line[:1] in "┃│"]  # header and body rows, rules left out
    shown = block[1:]
    assert rows[: len(shown)] == shown
