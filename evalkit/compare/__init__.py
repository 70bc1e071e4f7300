"""Paired comparison of two runs: pairing, per-row statistics, verdicts, Markdown/JSON/PNG output."""

from evalkit.compare.markdown import render_markdown
from evalkit.compare.output import render_json
from evalkit.compare.pairing import Pairing, pair_runs
from evalkit.compare.plot import render_plot
from evalkit.compare.report import JSON_KEYS, build_report

__all__ = [
    "JSON_KEYS",
    "Pairing",
    "build_report",
    "pair_runs",
    "render_json",
    "render_markdown",
    "render_plot",
]
