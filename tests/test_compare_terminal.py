"""`compare` prints a terminal table on a TTY, Markdown when piped or with --format md (issue 43)."""

import io
import sys
from pathlib import Path

import pytest

from evalkit.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "results" / "compare-example"


class _Stdout(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _compare(monkeypatch, tty: bool, *extra: str) -> str:
    if not (EXAMPLE / "fp32" / "samples.jsonl").exists():
        pytest.skip("compare example not generated")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "250")  # a wide terminal: one line per row
    out = _Stdout(tty)
    monkeypatch.setattr(sys, "stdout", out)
    rc = main(["compare", "results/compare-example/fp32", "results/compare-example/fp16", *extra])
    assert rc == 0
    return out.getvalue()


def test_a_terminal_gets_a_table_not_markdown(monkeypatch):
    text = _compare(monkeypatch, True)
    assert "| task |" not in text and "|---" not in text
    assert "\x1b[" in text  # rich drew it for a terminal
    plain = [line for line in text.splitlines() if "flexible-extract" in line]
    assert plain and "gsm8k" in plain[0] and "1319" in plain[0]
    assert "compare: inconclusive" in text and "Inconclusive: no significant loss" in text


def test_a_pipe_gets_the_markdown_report(monkeypatch):
    text = _compare(monkeypatch, False)
    assert text == (EXAMPLE / "report.md").read_text()


def test_format_md_forces_markdown_on_a_terminal(monkeypatch):
    text = _compare(monkeypatch, True, "--format", "md")
    assert text == (EXAMPLE / "report.md").read_text()
