"""PNG plots of a drift run: each metric against position, one line per arm, log axes.

Drawn from the run directory's JSON (not from live objects), so plots can be redrawn from any
saved run. Exact zeros cannot sit on a log axis and are left out of the lines (the tables say
how many there were).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from evalkit.compare.figure import save_figure

ARM_COLORS = {"fp32": "0.45", "fp32-aa": "0.6", "fp16": "tab:blue", "bf16": "tab:orange"}
TOKEN_PLOTS = {
    "kl": ("kl.png", "mean KL(p_fp32 ‖ p_arm) per position bucket", "KL (nats)"),
    "top1_disagree": ("top1.png", "top-1 disagreement with the fp32 arm", "1 − top-1 agreement"),
    "abs_dnll": ("nll.png", "|Δ NLL| of the actual next token", "|Δ NLL| (nats)"),
}
FP16_MAX = 65504.0


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(rows: list[dict], key: str = "mean") -> dict:
    out: dict = defaultdict(lambda: ([], []))
    for r in rows:
        v, p = r.get(key), r.get("position")
        if v is None or p is None or v <= 0:
            continue
        xs, ys = out[(r["mode"], r["arm"])]
        xs.append(p)
        ys.append(v)
    return out


def _plotted(rows: list[dict]) -> list[dict]:
    """Each mode × arm series without its one-position last bucket (`fit_points.without_sliver`)."""
    from evalkit.drift.fit_points import without_sliver

    series: dict = defaultdict(list)
    for r in rows:
        series[(r["mode"], r["arm"])].append(r)
    out = []
    for rs in series.values():
        out += without_sliver(sorted(rs, key=lambda r: r["pos_lo"]))
    return out


def plot_run(run: dict, out_dir: str | Path, prefix: str = "") -> list[Path]:
    """Write the PNGs for a loaded run (`rundir.load_run`); return their paths."""
    plt = _plt()
    out_dir = Path(out_dir)
    buckets = run.get("buckets") or []
    states = run.get("states") or []
    modes = [m for m in ("prefill", "decode") if any(r["mode"] == m for r in buckets + states)]
    title = (run.get("summary") or {}).get("title") or ""
    paths = []
    for metric, (fname, what, ylabel) in TOKEN_PLOTS.items():
        rows = _plotted([r for r in buckets if r["metric"] == metric])
        if not rows or not modes:
            continue
        fig, axes = plt.subplots(1, len(modes), figsize=(5.2 * len(modes), 3.9), squeeze=False)
        means, p99s = _series(rows, "mean"), _series(rows, "p99")
        for ax, mode in zip(axes[0], modes):
            for (m, arm), (xs, ys) in sorted(means.items()):
                if m != mode:
                    continue
                c = ARM_COLORS.get(arm)
                ax.plot(xs, ys, marker="o", ms=3, color=c, label=f"{arm} mean")
                _band(ax, rows, mode, arm, c)
                if metric != "top1_disagree" and (m, arm) in p99s:
                    px, py = p99s[(m, arm)]
                    ax.plot(px, py, ls=":", color=c, lw=1, label=f"{arm} p99")
            arms_here = sorted({r["arm"] for r in rows if r["mode"] == mode})
            zero = [a for a in arms_here if (mode, a) not in means]
            if zero:  # nothing to draw on a log axis: say so instead of leaving the arm out silently
                ax.text(
                    0.02,
                    0.02,
                    f"exactly 0 at every position: {', '.join(zero)}",
                    transform=ax.transAxes,
                    fontsize=8,
                    color="0.3",
                )
            _log_axes(ax, f"{mode}", ylabel)
        fig.suptitle(f"{what}{' — ' + title if title else ''}", fontsize=10)
        fig.tight_layout()
        paths.append(_save(fig, out_dir / f"{prefix}{fname}"))
    if states and modes:
        paths.append(_plot_states(plt, states, modes, out_dir / f"{prefix}state.png", title))
    return paths


def _plot_states(plt, states: list[dict], modes: list[str], path: Path, title: str) -> Path:
    fig, axes = plt.subplots(2, len(modes), figsize=(5.2 * len(modes), 7.0), squeeze=False)
    by: dict = defaultdict(lambda: defaultdict(list))
    for r in states:
        by[(r["mode"], r["arm"])][r["position"]].append(r)
    for j, mode in enumerate(modes):
        ax_e, ax_m = axes[0][j], axes[1][j]
        for (m, arm), per_pos in sorted(by.items()):
            if m != mode:
                continue
            c = ARM_COLORS.get(arm)
            pos = np.array(sorted(per_pos))
            rel = [[x["rel_fro"] for x in per_pos[p] if x["rel_fro"] is not None] for p in pos]
            mean = np.array([np.mean(v) if v else np.nan for v in rel])
            lo = np.array([np.min(v) if v else np.nan for v in rel])
            hi = np.array([np.max(v) if v else np.nan for v in rel])
            ok = mean > 0
            if ok.any():
                ax_e.plot(pos[ok], mean[ok], marker="o", ms=3, color=c, label=f"{arm} (mean of layers)")
                ax_e.fill_between(pos[ok], np.maximum(lo[ok], mean[ok] * 1e-3), hi[ok], color=c, alpha=0.15)
            mx = np.array([max(x["max_abs"] for x in per_pos[p]) for p in pos])
            mref = np.array([max(x["max_abs_ref"] for x in per_pos[p]) for p in pos])
            ax_m.plot(pos, mx, marker="o", ms=3, color=c, label=f"{arm}")
            if arm == sorted(a for (mm, a) in by if mm == mode)[0]:
                ax_m.plot(pos, mref, color="k", lw=1, ls="--", label="fp32 arm")
        _log_axes(
            ax_e, f"{mode}: state error (band = min–max over layers)", "‖S_arm − S_fp32‖_F / ‖S_fp32‖_F"
        )
        ax_m.axhline(FP16_MAX, color="red", lw=1, ls=":", label="fp16 max 65504")
        _log_axes(ax_m, f"{mode}: max |state value|", "max |S|")
    fig.suptitle(f"KDA recurrent state vs the fp32 arm{' — ' + title if title else ''}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _band(ax, rows: list[dict], mode: str, arm: str, color) -> None:
    """The 95% CI across prompts of a study's bucket means (rows with ci_low/ci_high), where positive."""
    pts = [
        (r["position"], r["ci_low"], r["ci_high"])
        for r in rows
        if r["mode"] == mode and r["arm"] == arm and r.get("ci_low") is not None and r.get("position")
    ]
    pts = [(x, max(lo, hi * 1e-3), hi) for x, lo, hi in sorted(pts) if hi > 0]
    if len(pts) > 1:
        x, lo, hi = (np.array(v) for v in zip(*pts))
        ax.fill_between(x, lo, hi, color=color, alpha=0.15, lw=0)


def _log_axes(ax, title: str, ylabel: str) -> None:
    ax.set_xscale("log")
    if any(line.get_ydata().size and np.nanmax(line.get_ydata()) > 0 for line in ax.get_lines()):
        ax.set_yscale("log")
    ax.set_xlabel("position (tokens read)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    if ax.get_lines():
        ax.legend(fontsize=7)


def _save(fig, path: Path) -> Path:
    save_figure(fig, path, dpi=110)  # compare's: a path it cannot write is one line, the figure closed
    return path
