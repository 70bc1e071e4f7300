"""The forest plot of the paired differences: one line per row, Δ cand−base with its 95% CI,
0 and the non-inferiority margin −δ marked. PNG (matplotlib) and a plain-text version that fits
in a pull-request comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.compare.figure import save_figure
from evalkit.compare.verdict import LOSS, MINOR_LOSS, pp, where

WIDTH = 41  # characters of the text axis
_COLOURS = {LOSS: "tab:red", MINOR_LOSS: "tab:orange", "inconclusive": "tab:gray", "gain": "tab:green"}


def _span(rows: list[dict[str, Any]]) -> float:
    ends = [abs(v) for r in rows for v in (r["diff_ci_low"], r["diff_ci_high"], r["margin"])]
    return 1.1 * max(ends + [1e-4])


def text_forest(rows: list[dict[str, Any]]) -> list[str]:
    """Lines of a text forest plot: `[` `]` the 95% CI, `*` the estimate, `|` zero, `:` −δ."""
    if not rows:
        return []
    span = _span(rows)
    col = lambda x: max(0, min(WIDTH - 1, round((x + span) / (2 * span) * (WIDTH - 1))))
    names = [where(r) for r in rows]
    pad = min(max(len(n) for n in names), 48)
    lines = [f"{'':<{pad}}  {pp(-span):<{WIDTH // 2}}{'0':<{WIDTH - WIDTH // 2 - 6}}{pp(span)} pp"]
    for name, r in zip(names, rows):
        cells = [" "] * WIDTH
        lo, hi = col(r["diff_ci_low"]), col(r["diff_ci_high"])
        for i in range(lo, hi + 1):
            cells[i] = "-"
        cells[col(-r["margin"])] = ":"
        cells[col(0.0)] = "|"
        cells[lo], cells[hi] = "[", "]"
        cells[col(r["diff"])] = "*"
        lines.append(
            f"{name[:pad]:<{pad}}  {''.join(cells)}  {pp(r['diff'])} [{pp(r['diff_ci_low'])}, "
            f"{pp(r['diff_ci_high'])}] {r['verdict']}"
        )
    lines.append(f"{'':<{pad}}  * Δ cand−base, [ ] 95% CI, | 0, : −δ (non-inferiority margin)")
    return lines


def render_forest(report: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    height = 1.2 + 0.32 * len(rows)
    fig, ax = plt.subplots(figsize=(8.0, min(height, 80.0)))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        est = 100 * r["diff"]
        err = [[est - 100 * r["diff_ci_low"]], [100 * r["diff_ci_high"] - est]]
        ax.errorbar([est], [y], xerr=err, fmt="o", capsize=3, color=_COLOURS.get(r["verdict"], "tab:blue"))
        ax.plot([-100 * r["margin"]] * 2, [y - 0.4, y + 0.4], color="tab:red", lw=1.5)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(ys, [where(r) for r in rows], fontsize=8)
    ax.set_ylim(-0.8, len(rows) - 0.2)
    ax.set_xlabel(
        f"Δ {report['candidate']['label']} − {report['baseline']['label']}, pp "
        "(Tango 95% CI; red bar: −δ, the non-inferiority margin)"
    )
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("paired differences", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
