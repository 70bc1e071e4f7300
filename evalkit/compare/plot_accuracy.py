"""PNG of accuracy per arm with Wilson 95% CIs: one panel per task x metric, over length if any."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from evalkit.compare.cell import CompareCell, cells_of
from evalkit.compare.figure import save_figure


def render_accuracy_plot(report: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str], list[CompareCell]] = defaultdict(list)
    for c in cells_of(report["rows"]):
        panels[(c.task, c.metric)].append(c)
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    arms = (  # label, colour, (accuracy, Wilson interval) of a cell
        (report["baseline"]["label"], "tab:blue", lambda c: (c.acc_baseline, c.wilson_baseline)),
        (report["candidate"]["label"], "tab:orange", lambda c: (c.acc_candidate, c.wilson_candidate)),
    )
    for ax, ((task, metric), cells) in zip(axes.flat, panels.items()):
        with_len = cells[0].length is not None
        for i, (label, colour, side) in enumerate(arms):
            acc = [100 * side(c)[0] for c in cells]
            # clamped: at 0% or 100% a Wilson limit equals the estimate up to rounding
            lo = [max(a - 100 * side(c)[1][0], 0.0) for a, c in zip(acc, cells)]
            hi = [max(100 * side(c)[1][1] - a, 0.0) for a, c in zip(acc, cells)]
            x = [c.length * (0.97 if i == 0 else 1.03) for c in cells] if with_len else [i]
            ax.errorbar(
                x, acc, yerr=[lo, hi], fmt="o-" if with_len else "o", color=colour, capsize=4, label=label
            )
        if with_len:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("context length (tokens)")
        else:
            ax.set_xticks([0, 1], [arms[0][0], arms[1][0]])
            ax.set_xlim(-0.6, 1.6)
        ax.set_title(f"{task} · {metric}", fontsize=10)
        ax.set_ylabel("accuracy % (Wilson 95% CI)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    save_figure(fig, path)
