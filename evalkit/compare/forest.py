"""The forest plot of the paired differences: one line per row, Δ cand−base with its 95% CI,
0 and the non-inferiority margin −δ marked. PNG (matplotlib) and a plain-text version that fits
in a pull-request comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.compare.cell import CompareCell, cells_of
from evalkit.compare.figure import save_figure
from evalkit.compare.verdict import LOSS, MINOR_LOSS, pp, where

WIDTH = 41  # characters of the text axis
_COLOURS = {LOSS: "tab:red", MINOR_LOSS: "tab:orange", "inconclusive": "tab:gray", "gain": "tab:green"}


def _span(cells: list[CompareCell]) -> float:
    ends = [abs(v) for c in cells for v in (c.diff_ci_low, c.diff_ci_high, c.margin)]
    return 1.1 * max(ends + [1e-4])


def text_forest(rows: list[dict[str, Any]]) -> list[str]:
    """Lines of a text forest plot: `[` `]` the 95% CI, `*` the estimate, `|` zero, `:` −δ."""
    if not rows:
        return []
    cells = cells_of(rows)
    span = _span(cells)
    col = lambda x: max(0, min(WIDTH - 1, round((x + span) / (2 * span) * (WIDTH - 1))))
    names = [where(r) for r in rows]
    pad = min(max(len(n) for n in names), 48)
    lines = [f"{'':<{pad}}  {pp(-span):<{WIDTH // 2}}{'0':<{WIDTH - WIDTH // 2 - 6}}{pp(span)} pp"]
    for name, c in zip(names, cells):
        axis = [" "] * WIDTH
        lo, hi = col(c.diff_ci_low), col(c.diff_ci_high)
        for i in range(lo, hi + 1):
            axis[i] = "-"
        axis[col(-c.margin)] = ":"
        axis[col(0.0)] = "|"
        axis[lo], axis[hi] = "[", "]"
        axis[col(c.diff)] = "*"
        lines.append(
            f"{name[:pad]:<{pad}}  {''.join(axis)}  {pp(c.diff)} [{pp(c.diff_ci_low)}, "
            f"{pp(c.diff_ci_high)}] {c.verdict}"
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
    for y, c in zip(ys, cells_of(rows)):
        est = 100 * c.diff
        err = [[est - 100 * c.diff_ci_low], [100 * c.diff_ci_high - est]]
        ax.errorbar([est], [y], xerr=err, fmt="o", capsize=3, color=_COLOURS.get(c.verdict, "tab:blue"))
        ax.plot([-100 * c.margin] * 2, [y - 0.4, y + 0.4], color="tab:red", lw=1.5)
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
