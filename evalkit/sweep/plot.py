"""sweep.png: accuracy against mantissa bits, one line per length (a panel per task); below it,
the mean paired gold log-probability difference against fp32 where the runs measured it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.arm import REFERENCE_BITS, Arm
from evalkit.sweep.margin import on_the_ladder


def write_plot(path: Path, summary: dict[str, Any], arms: dict[str, Arm]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = arms[summary["baseline"]]
    ladder = {label for label, a in arms.items() if on_the_ladder(a, base) or label == base.label}
    cells = [c for c in summary["cells"] if c["arm"] in ladder]
    tasks = sorted({(c["task"], c["metric"]) for c in cells})
    has_gold = any(c.get("gold_delta_mean") is not None for c in cells)
    rows = 2 if has_gold else 1
    ncol = max(len(tasks), 1)
    fig, axes = plt.subplots(rows, ncol, figsize=(4.2 * ncol, 3.4 * rows), squeeze=False)
    for j, (task, metric) in enumerate(tasks):
        mine = [c for c in cells if (c["task"], c["metric"]) == (task, metric)]
        lengths = sorted({c["length"] for c in mine}, key=lambda x: (x is None, x or 0))
        for length in lengths:
            pts = sorted((arms[c["arm"]].mantissa_bits, c) for c in mine if c["length"] == length)
            name = "all" if length is None else f"{length:,}"
            xs = [b for b, _ in pts]
            axes[0][j].plot(xs, [100 * c["accuracy"] for _, c in pts], marker="o", label=name)
            if has_gold:
                g = [(b, c["gold_delta_mean"]) for b, c in pts if c.get("gold_delta_mean") is not None]
                axes[1][j].plot([b for b, _ in g], [v for _, v in g], marker="o", label=name)
        axes[0][j].set_title(f"{task} ({metric})", fontsize=9, pad=14)
        axes[0][j].set_ylabel("accuracy %")
        axes[0][j].set_ylim(-3, 103)
        for i in range(rows):
            ax = axes[i][j]
            for ref, bits in REFERENCE_BITS.items():
                ax.axvline(bits, color="0.7", ls="--", lw=0.8)
                where = ax.get_xaxis_transform()
                ax.text(bits, 1.0, ref, transform=where, fontsize=7, ha="center", va="bottom")
            ax.set_xlabel("mantissa bits kept by a store")
            ax.legend(title="length", fontsize=7, title_fontsize=7)
        if has_gold:
            axes[1][j].set_ylabel("mean Δ log p(answer) vs fp32")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
