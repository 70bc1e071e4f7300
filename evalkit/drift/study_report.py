"""Markdown and headline numbers of a drift study (a run directory with `summary["study"]`).

Every number is across prompts: the mean of the per-prompt values with its 95% t-CI; p99 is the
mean of the per-prompt exact p99s; growth exponents are per-prompt fits summarised across
prompts, with one sensitivity row per later fit start.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.drift.across import SlopeSummary
from evalkit.drift.modes import mode_description
from evalkit.drift.positions import fmt, format_position
from evalkit.drift.result import DriftArmSummary, DriftModeSummary, DriftSummary, MeanCI
from evalkit.drift.verdict import SENSITIVITY_LABEL, verdict_lines


def _ci(c: MeanCI, fmt: str = ".3g", scale: float = 1.0) -> str:
    if c.mean is None:
        return "–"
    m = format(c.mean * scale, fmt)
    if c.ci_low is None:
        return m
    return f"{m} [{format(c.ci_low * scale, fmt)}, {format(c.ci_high * scale, fmt)}]"


def _slope(g: SlopeSummary) -> str:
    if g.verdict == "zero":
        return "exactly 0"
    if g.mean is None:
        return "–"
    ci = "" if g.ci_low is None else f" [{g.ci_low:.2f}, {g.ci_high:.2f}]"
    left = g.n_zero + g.n_insufficient
    return f"{g.mean:.2f}{ci}" + (f" ({left} left out)" if left else "")


def _floor_ratio(a: DriftArmSummary) -> str:
    fl = a.floor.kl_last_bucket if a.floor else None
    if fl is None:
        return "–"
    if fl.ratio is not None:
        return f"{fl.ratio:.3g}" + (f" [{fl.ci_low:.3g}, {fl.ci_high:.3g}]" if fl.ci_low else "")
    return "floor = 0" if fl.den_zero else "–"


def study_markdown(run: dict, *, heading_level: int = 3, images: bool = True) -> str:
    raw = run["summary"]
    s = DriftSummary.from_dict(raw)
    cfg = s.config
    h = "#" * heading_level
    title = s.title or cfg.get("model", {}).get("path", "model")
    lines = [f"{h} State-precision drift study: {title}", ""]
    prompts = run.get("prompts") or []
    src = cfg.get("input", {}).get("source", "?")
    lines.append(
        f"{cfg.get('n_prompts')} prompts of {cfg.get('input', {}).get('length')} tokens (first: {src}; "
        f"all in prompts.json with their seeds and sha256). Arms {', '.join(cfg.get('arms', []))} against "
        f"an fp32 state arm on the same tokens; model weights {cfg.get('model', {}).get('dtype', '?')}."
        + (f" A/A floor `{cfg['floor_arm']}`: {cfg.get('floor_how')}." if cfg.get("floor_arm") else "")
        + " Every figure is across prompts: mean [95% t-CI]; p99 is each prompt's exact 99th percentile"
        " over its positions, averaged; max is the largest value anywhere."
    )
    lines.append("")
    lines.append(f"{h}# Verdicts")
    lines.append("")
    lines += verdict_lines(raw)
    lines.append("")
    for mode, st in s.study.items():
        lines += _mode_lines(h, mode, st, cfg.get("n_prompts"))
    fr = s.free_running
    if fr:
        lines.append(f"{h}# Free-running (first prompt): greedy {fr.get('n_tokens')} tokens")
        lines.append("")
        for arm, a in fr.get("arms", {}).items():
            div = "never" if a.get("first_divergence") is None else str(a["first_divergence"])
            lines.append(
                f"- {arm}: first divergent token {div}; flags {', '.join(a.get('flags', [])) or 'none'}"
            )
        lines.append("")
    for err in s.errors:
        lines.append(f"**Failed: {err['error']}** (traceback in summary.json)")
        lines.append("")
    if images:
        pngs = [p for p in ("kl.png", "top1.png", "nll.png", "state.png") if (Path(run["dir"]) / p).is_file()]
        if pngs:
            lines.append("Plots: " + ", ".join(f"[{p}]({p})" for p in pngs) + ".")
            lines.append("")
    if prompts:
        lines.append(
            "Per-prompt rows: prompt_results.csv (scalars and slopes), prompt_buckets.csv (bucket means, "
            "exact p50/p99/max), states.csv (per layer); across prompts: buckets.csv, state_errors.csv."
        )
    return "\n".join(lines).rstrip() + "\n"


def _mode_lines(h: str, mode: str, st: DriftModeSummary, n_requested: int | None) -> list[str]:
    """One mode's section: the per-arm table, the growth exponents and the cost."""
    how = mode_description(mode, st.chunk_size)
    lines = [f"{h}# Teacher-forced, {mode}: {how}; {st.n_prompts} prompts", ""]
    if st.stopped_by_budget:
        lines += [f"**Stopped by its time budget after {st.n_prompts} of {n_requested} prompts.**", ""]
    lb = st.last_bucket or [None, None]
    at = f"{format_position(lb[0])}–{format_position(lb[1])}" if lb[0] else "end"
    lines.append(
        f"| arm | mean KL | p99 KL | max KL | KL ÷ A/A floor ({at}) | top-1 agreement % "
        "| mean \\|ΔNLL\\| | ln PPL ratio | state rel. error at end | max \\|state\\| | non-finite |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for arm, a in st.arms.items():
        lines.append(
            f"| {arm} | {_ci(a.mean_kl)} | {_ci(a.p99_kl)} | {fmt(a.max_kl)} | {_floor_ratio(a)} "
            f"| {_ci(a.top1_agreement, '.2f', 100)} "
            f"| {_ci(a.mean_abs_dnll)} | {_ci(a.ln_ppl_ratio, '+.2e')} "
            f"| {_ci(a.state_rel_err_end)} "
            f"| {fmt(a.state_max_abs)} | {a.nonfinite} |"
        )
    lines.append("")
    keys = list(st.fit_ranges)
    heads = [
        f"{'main' if k == 'main' else SENSITIVITY_LABEL.get(k, k)} "
        f"[{format_position(st.fit_ranges[k][0])}, {format_position(st.fit_ranges[k][1])}]"
        for k in keys
    ]
    lines.append(
        "Growth exponents (per-prompt OLS of log bucket mean on log position; Poisson for top-1 flips; "
        "mean [95% t-CI] across prompts):"
    )
    lines.append("")
    lines.append("| arm | metric | " + " | ".join(heads) + " |")
    lines.append("|---|---|" + "---|" * len(heads))
    for arm, a in st.arms.items():
        for metric, rows in a.growth.items():
            lines.append(f"| {arm} | {metric} | " + " | ".join(_slope(rows[k]) for k in keys) + " |")
    lines.append("")
    lines.append(
        f"Cost: {fmt(st.seconds_per_prompt.mean, '.1f')} s per prompt (all arms), {st.n_prompts} prompts."
    )
    lines.append("")
    return lines


def study_brief(summary: dict) -> dict:
    """Headline numbers per mode and arm (what `compare --format json` and the GPU note quote)."""
    s = DriftSummary.from_dict(summary)
    out: dict = {"n_prompts": s.config.get("n_prompts"), "verdicts": summary.get("verdicts")}
    for mode, st in s.study.items():
        out[mode] = {
            "length": st.length,
            "n_prompts": st.n_prompts,
            "stopped_by_budget": st.stopped_by_budget,
            "chunk_size": st.chunk_size,
            "seconds_per_prompt": st.seconds_per_prompt.mean,
            "arms": {
                arm: {
                    "mean_kl": a.mean_kl.to_dict(),
                    "top1_agreement": a.top1_agreement.to_dict(),
                    "state_rel_err_end": a.state_rel_err_end.to_dict(),
                    "floor": a.floor.to_dict() if a.floor else None,
                    "kl_exponent": {k: _exponent(g) for k, g in a.growth["kl"].items()},
                    "state_exponent": {k: _exponent(g) for k, g in a.growth["state_rel_fro"].items()},
                    "nonfinite": a.nonfinite,
                }
                for arm, a in st.arms.items()
            },
        }
    if s.errors:
        out["errors"] = [e["error"] for e in s.errors]
    return out


def _exponent(g: SlopeSummary) -> dict:
    return {x: getattr(g, x) for x in ("mean", "ci_low", "ci_high", "start", "stop", "n_prompts", "verdict")}
