"""Paired comparison of two runs: pairing, per-row statistics, verdicts, Markdown/JSON/PNG output."""

from evalkit.compare.bits import BitsOfMargin, bits_of_margin
from evalkit.compare.brief import render_brief
from evalkit.compare.markdown import render_markdown
from evalkit.compare.output import render_json
from evalkit.compare.pairing import Pairing, pair_runs
from evalkit.compare.plot import render_plot
from evalkit.compare.report import JSON_KEYS, SCHEMA_VERSION, build_report
from evalkit.compare.verdict import VERDICTS

__all__ = [
    "BitsOfMargin",
    "bits_of_margin",
    "JSON_KEYS",
    "Pairing",
    "SCHEMA_VERSION",
    "VERDICTS",
    "build_report",
    "pair_runs",
    "render_brief",
    "render_json",
    "render_markdown",
    "render_plot",
]
