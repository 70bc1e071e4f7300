"""Verdict sentences a reviewer can paste, with the caveats that qualify them.

"KL(fp32‖fp16) per token grows as L^0.52 (95% CI 0.41 to 0.63) over [512, 64k] across 16 prompts,
12× the A/A floor at 64k (95% CI 9× to 15×)." The exponent is the across-prompt mean of per-prompt
fits (`evalkit.drift.across`); the floor ratio is the geometric mean over prompts of arm / A/A in
the last fit point (`evalkit.drift.fit_points`: the last bucket, a one-position sliver merged in),
whose positions the sentence names. Caveats are printed, not buried: a floor that dominates (the arm within
FLOOR_DOMINATES x of it), an exponent that moves with the fitting range, prompts left out, a mode
stopped by its time budget, fewer prompts than a CI deserves.
"""

from __future__ import annotations

from evalkit.drift.across import FLAT_BELOW, SlopeSummary
from evalkit.drift.floor import AA_ARM
from evalkit.drift.positions import format_position
from evalkit.drift.result import DriftArmSummary, DriftFloor, DriftModeSummary, DriftSummary

FLOOR_DOMINATES = 3.0  # arm KL below this many times the A/A floor: the floor, not the state, is measured
FEW_PROMPTS = 8
VERB = {
    "grows": "grows as",
    "shrinks": "shrinks as",
    "flat": "is flat:",
    "inconclusive": "has no clear trend:",
    "insufficient": "goes as",
}
SENSITIVITY_LABEL = {"from_1024": "from 1k", "from_4096": "from 4k", "from_16384": "from 16k"}


def _label(metric: str, arm: str) -> str:
    return {
        "kl": f"KL(fp32‖{arm}) per token",
        "state_rel_fro": f"the state relative error of {arm}",
        "abs_dnll": f"|ΔNLL| of {arm} per token",
        "top1_disagree": f"{arm}'s top-1 disagreement rate",
    }[metric]


def growth_sentence(metric: str, arm: str, g: SlopeSummary, n_prompts: int) -> str:
    lab = _label(metric, arm)
    rng = f"[{format_position(g.start)}, {format_position(g.stop)}]"
    if g.verdict == "zero":
        return f"{lab} is exactly 0 over {rng} in all {n_prompts} prompts"
    if g.mean is None:
        return f"{lab} has too few non-zero buckets over {rng} for an exponent"
    ci = "one prompt, no CI" if g.ci_low is None else f"95% CI {g.ci_low:.2f} to {g.ci_high:.2f}"
    verb = VERB.get(g.verdict, "goes as")
    return f"{lab} {verb} L^{g.mean:.2f} ({ci}) over {rng} across {g.n_prompts} prompts"


def _floor_text(
    floor: DriftFloor | None, at: str, weights_dtype: str | None = None, bucket: list[int] | None = None
) -> tuple[str, list[str]]:
    if not floor:
        return "", []
    f = floor.kl_last_bucket
    if f.floor_mean == 0 or (f.ratio is None and f.den_zero):
        return (
            f", the A/A floor is exactly 0 at {at} (identical arithmetic: all of it is the state's storage)",
            [],
        )
    if f.ratio is None:
        return "", []
    where = f"positions {format_position(bucket[0])}–{format_position(bucket[1])}" if bucket else ""
    ci = "" if f.ci_low is None else f"95% CI {f.ci_low:.3g}× to {f.ci_high:.3g}×"
    inside = "; ".join(x for x in (where, ci) if x)
    text = f", {f.ratio:.3g}× the A/A floor at {at}" + (f" ({inside})" if inside else "")
    caveats = []
    if f.ratio >= FLOOR_DOMINATES and f.ci_low is not None and f.ci_low < FLOOR_DOMINATES:
        caveats.append(
            f"the ratio to the A/A floor at {at} is uncertain (95% CI down to {f.ci_low:.3g}×): "
            "that the floor dominates cannot be excluded"
        )
    if f.ratio < FLOOR_DOMINATES:
        lead = (
            f"the A/A floor dominates: at {at} the arm's KL is only {f.ratio:.3g}× that of fp32 "
            "against fp32 computed another way, so this curve mostly measures arithmetic noise"
        )
        if weights_dtype in ("float32", "fp32"):
            # fp32 weights already: what is left is fp32 reassociation, grown by the model itself
            caveats.append(
                lead + " (fp32 reassociation, amplified by the model: with fp32 weights there is no "
                "bf16 activation noise to remove), not the state's storage"
            )
        else:
            caveats.append(
                lead + " (e.g. bf16 activations), not the state's storage; rerun with fp32 weights "
                "(--weights-dtype fp32) to see the state alone"
            )
    return text, caveats


def verdicts(summary: dict) -> list[dict]:
    """One verdict per mode × arm (the A/A arm and an exact fp32 arm describe the floor instead)."""
    s = DriftSummary.from_dict(summary)
    weights_dtype = (s.config.get("model") or {}).get("dtype")
    out = []
    for mode, st in s.study.items():
        for arm, a in st.arms.items():
            text, caveats = _arm_verdict(mode, arm, a, st, weights_dtype)
            out.append({"mode": mode, "arm": arm, "text": text, "caveats": caveats})
    return out


def _arm_verdict(
    mode: str, arm: str, a: DriftArmSummary, st: DriftModeSummary, weights_dtype: str | None
) -> tuple[str, list[str]]:
    """The sentence and caveats of one arm in one mode."""
    n, g = st.n_prompts, a.growth["kl"]["main"]
    if arm == AA_ARM:
        sentence = growth_sentence("kl", "fp32 computed another way", g, n)
        return f"{mode} mode, A/A floor: {sentence}; mean KL {_g(a.mean_kl.mean)}.", []
    at = format_position(st.length)
    floor_text, caveats = _floor_text(a.floor, at, weights_dtype, st.last_bucket)
    text = f"{mode} mode: " + growth_sentence("kl", arm, g, n) + floor_text + "."
    gs = a.growth["state_rel_fro"]["main"]
    if gs.verdict != "insufficient":
        sentence = growth_sentence("state_rel_fro", arm, gs, n)
        text += " " + sentence[0].upper() + sentence[1:] + "."
    sens = []
    for key, row in a.growth["kl"].items():
        if key == "main" or row.mean is None:
            continue
        lab = SENSITIVITY_LABEL.get(key, key)
        ci = "" if row.ci_low is None else f" [{row.ci_low:.2f}, {row.ci_high:.2f}]"
        sens.append(f"{lab} L^{row.mean:.2f}{ci}")
        if (  # a difference below FLAT_BELOW is not one a reader acts on, however tight
            g.mean is not None
            and row.ci_low is not None
            and not (row.ci_low <= g.mean <= row.ci_high)
            and abs(row.mean - g.mean) >= FLAT_BELOW
        ):
            caveats.append(
                f"the exponent depends on the fitting range: {lab} onward it is L^{row.mean:.2f} "
                f"({row.ci_low:.2f} to {row.ci_high:.2f}), which excludes the main fit's "
                f"{g.mean:.2f}"
            )
    if sens:
        text += " Sensitivity (fit start): " + "; ".join(sens) + "."
    if g.n_zero or g.n_insufficient:
        caveats.append(
            f"{g.n_zero + g.n_insufficient} of {n} prompts gave no exponent "
            f"({g.n_zero} exactly 0, {g.n_insufficient} too few non-zero buckets)"
        )
    if n < FEW_PROMPTS:
        caveats.append(
            f"only {n} prompts: the between-prompt CI is wide and its normality assumption matters"
        )
    if st.stopped_by_budget:
        caveats.append(f"stopped by its time budget after {n} prompts")
    return text, caveats


def _g(x) -> str:
    return "–" if x is None else f"{x:.3g}"


def verdict_lines(summary: dict) -> list[str]:
    """The verdicts as Markdown bullets, each caveat on its own indented line."""
    lines = []
    for v in summary.get("verdicts") or verdicts(summary):
        lines.append(f"- **{v['arm']}**, {v['text']}")
        lines += [f"  - CAVEAT: {c}." for c in v["caveats"]]
    return lines
