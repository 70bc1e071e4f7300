"""The README's quoted outputs are what the code produces now: `evalkit tasks` (the rows shown and
the count it names)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
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


# `$ evalkit compare|plan results/...` blocks: commands on committed data, reproducible anywhere
COMMITTED_DATA_BLOCKS = re.findall(
    r"\n\$ (evalkit (?:compare|plan) results/[^\n]*)\n(.*?)\n```", README, re.S
)


@pytest.mark.parametrize(
    "command, body", COMMITTED_DATA_BLOCKS, ids=[c[:60] for c, _ in COMMITTED_DATA_BLOCKS]
)
def test_readme_blocks_on_committed_data_are_what_the_code_prints(command, body, tmp_path, monkeypatch):
    """Every line the README quotes (its `...` elisions aside) is a line of the command's output
    now; a file the command writes goes to a temporary folder."""
    argv = shlex.split(command)[1:]
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--json", "--plot"):
            argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
    monkeypatch.chdir(REPO)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli(argv)
    printed = set(out.getvalue().splitlines()) | set(err.getvalue().splitlines())
    quoted = [line for line in body.splitlines() if line.strip() and line.strip() != "..."]
    if "$ echo $?" in quoted:  # the README shows the exit status after the output
        at = quoted.index("$ echo $?")
        assert rc == int(quoted[at + 1])
        quoted = quoted[:at]
    else:  # a failing --fail-on gate exits 1
        assert rc == (1 if any("**FAIL**" in line for line in quoted) else 0)
    assert len(quoted) >= 5
    assert [line for line in quoted if line not in printed] == []
