"""The README's quoted outputs are what the code produces now: `evalkit tasks` (the rows shown and
the count it names), and the main job's committed runs (results/main-job-cpu/), whose task configs
must hash as the code builds them today (else a newcomer's run is refused as "a different config")
and whose summary table and paired comparison the README pastes."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from evalkit.cli import main as cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
MAIN_JOB = REPO / "results" / "main-job-cpu"


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


def _main_job_manifest(arm: str) -> dict:
    return json.loads((MAIN_JOB / "runs" / f"reference-{arm}" / "manifest.json").read_text())


@pytest.mark.parametrize("arm", ["fp16", "fp32"])
def test_the_main_jobs_committed_runs_are_of_the_codes_task_configs(arm):
    """The committed run's task configs hash as `evalkit run` builds them now (a config change,
    e.g. a task's version, makes a fresh run refuse to pair with the committed one)."""
    from evalkit.runner.execute import task_entries
    from evalkit.tasks.registry import get_task

    tasks = _main_job_manifest(arm)["tasks"]
    now = task_entries([get_task(n) for n in tasks], {n: t["lengths"] for n, t in tasks.items()}, None)
    assert {n: t["hash"] for n, t in tasks.items()} == {n: t["hash"] for n, t in now.items()}


def test_the_readme_pastes_the_main_jobs_run_table():
    """The `evalkit run --arm fp16` block: its table is the committed run's summary as the code
    renders it, its title and last line the committed console output's."""
    from evalkit.runner.table import render_summary

    block = _block_after("evalkit run --arm fp16 --data-parallel auto")
    console = (MAIN_JOB / "run-fp16.txt").read_text().splitlines()
    summary = json.loads((MAIN_JOB / "runs" / "reference-fp16" / "summary.json").read_text())
    table = render_summary(summary, title="fp16: runs/reference-fp16").rstrip("\n").splitlines()
    body = [line.rstrip() for line in block[1:-1]]
    assert body[: len(table)] == [line.rstrip() for line in table]
    # the lines between the table and the closing one (headroom, latency) as the run printed them
    assert body[len(table) :] == [line.rstrip() for line in console[len(table) : -1]]
    assert block[-1].split(", ")[0] == console[-1].split(", ")[0]  # "120 new samples (0 already on disk)"


def test_the_readme_pastes_the_main_jobs_comparison():
    """Every table row of the README's `evalkit compare` block is a line of that command's output
    on the committed runs."""
    printed = set(
        _cli("compare", str(MAIN_JOB / "runs" / "reference-fp32"), str(MAIN_JOB / "runs" / "reference-fp16"))
        .replace(str(MAIN_JOB / "runs") + "/", "runs/")
        .splitlines()
    )
    rows = [
        line
        for line in _block_after("evalkit compare runs/reference-fp32 runs/reference-fp16")
        if line.startswith("|")
    ]
    assert len(rows) >= 10
    missing = [r for r in rows if r not in printed]
    assert not missing, missing


# `$ evalkit compare|plan results/...` blocks: commands on committed data, reproducible anywhere
BLOCK = r"\n\$ (evalkit (?:compare|plan) results/[^\n]*)\n(.*?)\n```"
COMMITTED_DATA_BLOCKS = re.findall(BLOCK, README, re.S)
BLOCK_IDS = [f"{i}:{c[:50]}" for i, (c, _) in enumerate(COMMITTED_DATA_BLOCKS)]


def _segments(command: str, body: str) -> list[tuple[str, list[str]]]:
    """A block's commands, each with the lines quoted as its output (a block may run several)."""
    out: list[tuple[str, list[str]]] = [(command, [])]
    for line in body.splitlines():
        if line.startswith("$ evalkit "):
            out.append((line[2:], []))
        elif line.strip() and line.strip() != "...":
            out[-1][1].append(line)
    return out


_WRITTEN = ("--json", "--plot", "--out", "--plan")  # options whose file a block may write first


@pytest.mark.parametrize("command, body", COMMITTED_DATA_BLOCKS, ids=BLOCK_IDS)
def test_readme_blocks_on_committed_data_are_what_the_code_prints(command, body, tmp_path, monkeypatch):
    """Every line the README quotes (its `...` elisions aside) is a line of its command's output
    now; a file a command writes (or reads after an earlier command wrote it) is in a temporary
    folder."""
    monkeypatch.chdir(REPO)
    checked = 0
    for seg_command, quoted in _segments(command, body):
        argv = shlex.split(seg_command)[1:]
        for i, arg in enumerate(argv[:-1]):
            if arg in _WRITTEN and not (REPO / argv[i + 1]).exists():
                argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli(argv)
        printed = set(out.getvalue().splitlines()) | set(err.getvalue().splitlines())
        if "$ echo $?" in quoted:  # the README shows the exit status after the output
            at = quoted.index("$ echo $?")
            assert rc == int(quoted[at + 1])
            quoted = quoted[:at]
        else:  # a failing --fail-on gate exits 1
            assert rc == (1 if any("**FAIL**" in line for line in quoted) else 0)
        assert [line for line in quoted if line not in printed] == []
        checked += len(quoted)
    assert checked >= 2  # not a vacuous block


@pytest.mark.slow
def test_the_sweep_demo_block_is_what_the_sweep_prints(tmp_path, monkeypatch):
    """The README's `evalkit sweep` demo on the tiny random checkpoint (made as the README says):
    every line it quotes is a line of the sweep's output now (~30 s on 2 cores)."""
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    made = subprocess.run([sys.executable, "-m", "evalkit.testing.tiny_models", "tiny-kimi"], timeout=300)
    assert made.returncode == 0
    block = _block_after("evalkit sweep --model tiny-kimi")
    printed = _cli(*shlex.split(block[0])[2:]).splitlines()
    quoted = [line for line in block[1:] if line.strip() and line.strip() != "..."]
    assert len(quoted) >= 8
    assert [line for line in quoted if not any(_same_line(line, p) for p in printed)] == []


# a paired log-prob delta in a sweep cell, "0.0 (+0.000982)"
_DELTA = re.compile(r"\(([+-][0-9.e-]+)\)")


def _same_line(quoted: str, printed: str) -> bool:
    """Equal lines, but for the paired log-prob deltas in parentheses: those of a random tiny model
    are ~1e-4 and move in their third digit with the CPU's BLAS (+0.000341 on one machine, +0.000362
    and +0.00036 with 1 and 4 threads on another), so they agree within 10% and their signs."""
    if _DELTA.sub("()", quoted) != _DELTA.sub("()", printed):
        return False
    pairs = zip(map(float, _DELTA.findall(quoted)), map(float, _DELTA.findall(printed)))
    return all(a == b or (a * b > 0 and abs(a - b) <= 0.1 * abs(a)) for a, b in pairs)
