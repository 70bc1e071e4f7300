"""Markdown summary of a drift run, for a pull request or `evalkit compare`'s drift section.

`drift_markdown(run_dir)` is the whole contract with `compare`: give it a directory written by
`evalkit drift` and it returns Markdown (headings start at level 3 so it nests in a report).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.drift.modes import mode_description
from evalkit.drift.positions import fmt, format_position
from evalkit.drift.rundir import load_run


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.2f}%"


def drift_markdown(run_dir: str | Path, *, heading_level: int = 3, images: bool = True) -> str:
    """Markdown: setup, per-mode table of the arms against fp32, growth verdicts, free running."""
    run = load_run(run_dir)
    s = run["summary"]
    if "study" in s:  # a many-prompt study (`evalkit.drift.study`)
        from evalkit.drift.study_report import study_markdown

        return study_markdown(run, heading_level=heading_level, images=images)
    cfg = s.get("config", {})
    h = "#" * heading_level
    lines = [f"{h} State-precision drift: {s.get('title') or cfg.get('model', {}).get('path', 'model')}", ""]
    inp = cfg.get("input", {})
    lines.append(
        f"Input: {inp.get('source', '?')}, {inp.get('length', '?')} tokens"
        f" (sha256 {str(inp.get('sha256', ''))[:12]}). Arms {', '.join(cfg.get('arms', []))} against an fp32"
        f" state arm on the same tokens; compute fp32 in every arm, only the stored state differs."
    )
    lines.append("")
    for mode, tf in (s.get("teacher_forced") or {}).items():
        lines.append(f"{h}# Teacher-forced, {mode}: {mode_description(mode, tf.get('chunk_size'))}")
        lines.append("")
        if tf.get("stopped_early"):
            lines.append(
                f"**Stopped early by its time budget: {tf['length']} of {tf['requested_length']} tokens.**"
            )
            lines.append("")
        lines.append(
            "| arm | mean KL | p99 KL | max KL | top-1 agreement | mean \\|ΔNLL\\| | ln PPL ratio "
            "| state rel. error at end (mean / worst layer) | max \\|state\\| | non-finite |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for arm, a in tf["arms"].items():
            st = a.get("state") or {}
            nonfin = (a.get("nonfinite_logits") or 0) + (st.get("n_nonfinite") or 0)
            lines.append(
                f"| {arm} | {fmt(a['kl']['mean'])} | {fmt(a['kl']['p99'])} | {fmt(a['kl']['max'])} "
                f"| {_pct(a.get('top1_agreement'))} | {fmt(a['abs_dnll']['mean'])} "
                f"| {fmt(a.get('ln_ppl_ratio'), '+.2e')} "
                f"| {fmt(st.get('final_rel_fro_mean'))} / {fmt(st.get('final_rel_fro_max'))} "
                f"| {fmt(st.get('max_abs'))} | {nonfin} |"
            )
        lines.append("")
        lines.append(
            f"Growth with position (fits from position {format_position(tf.get('fit_from', 1))};"
            " slope of log(mean) on log(position), 95% CI):"
        )
        lines.append("")
        for arm, a in tf["arms"].items():
            texts = [g["text"] for g in a.get("growth", {}).values() if g.get("text")]
            if texts:
                lines.append(f"- **{arm}**: " + "; ".join(texts) + ".")
        lines.append("")
        lines.append(
            f"Cost: fp32 arm {fmt(tf.get('seconds_fp32'), '.1f')} s; "
            + "; ".join(f"{arm} {fmt(a.get('seconds'), '.1f')} s" for arm, a in tf["arms"].items())
            + f"; wall {fmt(tf.get('wall_seconds'), '.1f')} s for {tf.get('length')} tokens."
        )
        lines.append("")
    fr = s.get("free_running")
    if fr:
        lines.append(
            f"{h}# Free-running: greedy {fr.get('n_tokens')} tokens from a "
            f"{fr.get('prompt_tokens')}-token prompt"
        )
        lines.append("")
        lines.append(
            "| arm | first divergent token | token agreement | agreement after divergence "
            "| flags | tokens/s |"
        )
        lines.append("|---|---|---|---|---|---|")
        ref = fr.get("reference", {})
        lines.append(
            f"| fp32 (reference) | – | – | – | {', '.join(ref.get('flags', [])) or 'none'} "
            f"| {fmt(ref.get('tokens_per_second'), '.1f')} |"
        )
        for arm, a in fr.get("arms", {}).items():
            div = "never" if a.get("first_divergence") is None else str(a["first_divergence"])
            lines.append(
                f"| {arm} | {div} | {_pct(a.get('token_agreement'))} "
                f"| {_pct(a.get('agreement_after_divergence'))} "
                f"| {', '.join(a.get('flags', [])) or 'none'} "
                f"| {fmt(a.get('tokens_per_second'), '.1f')} |"
            )
        lines.append("")
    for err in s.get("errors") or []:
        lines.append(f"**Failed: {err['error']}** (traceback in summary.json)")
        lines.append("")
    if images:
        pngs = [p for p in ("kl.png", "top1.png", "nll.png", "state.png") if (Path(run_dir) / p).is_file()]
        if pngs:
            lines.append("Plots: " + ", ".join(f"[{p}]({p})" for p in pngs) + ".")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def drift_brief(run: str | Path | dict) -> dict:
    """The headline numbers of a drift run (a run directory or its summary dict), per mode and
    arm, plus free running and errors: what `compare --format json` and the GPU note quote."""
    summary = run if isinstance(run, dict) else load_run(run)["summary"]
    if "study" in summary:
        from evalkit.drift.study_report import study_brief

        return study_brief(summary)
    out: dict = {}
    for mode, tf in (summary.get("teacher_forced") or {}).items():
        out[mode] = {
            "length": tf["length"],
            "requested_length": tf.get("requested_length", tf["length"]),
            "stopped_early": tf.get("stopped_early", False),
            "chunk_size": tf.get("chunk_size"),
            "wall_seconds": tf["wall_seconds"],
            "seconds_fp32_arm": tf["seconds_fp32"],
            "arms": {},
        }
        for arm, a in tf["arms"].items():
            st = a.get("state") or {}
            out[mode]["arms"][arm] = {
                "mean_kl": a["kl"]["mean"],
                "p99_kl": a["kl"]["p99"],
                "max_kl": a["kl"]["max"],
                "top1_agreement": a["top1_agreement"],
                "mean_abs_dnll": a["abs_dnll"]["mean"],
                "ln_ppl_ratio": a["ln_ppl_ratio"],
                "state_rel_err_end_mean": st.get("final_rel_fro_mean"),
                "state_rel_err_end_max": st.get("final_rel_fro_max"),
                "state_max_abs": st.get("max_abs"),
                "state_n_over_fp16": st.get("n_over_fp16"),
                "nonfinite": (a.get("nonfinite_logits") or 0) + (st.get("n_nonfinite") or 0),
                "tokens_per_second": a.get("tokens_per_second"),
                "growth": {
                    m: {k: g.get(k) for k in ("slope", "ci_low", "ci_high", "verdict", "text")}
                    for m, g in a.get("growth", {}).items()
                },
            }
    fr = summary.get("free_running")
    if fr:
        keys = (
            "n_generated",
            "first_divergence",
            "token_agreement",
            "agreement_after_divergence",
            "flags",
            "tokens_per_second",
        )
        out["free_running"] = {
            "prompt_tokens": fr["prompt_tokens"],
            "n_tokens": fr["n_tokens"],
            "arms": {arm: {k: a.get(k) for k in keys} for arm, a in fr["arms"].items()},
            "fp32_flags": fr["reference"]["flags"],
            "fp32_tokens_per_second": fr["reference"].get("tokens_per_second"),
        }
    if summary.get("errors"):
        out["errors"] = [e["error"] for e in summary["errors"]]
    return out
