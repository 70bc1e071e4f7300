"""sweep.json (everything) and sweep.md (accuracy per arm x cell, the bits of margin)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _cell_text(c: dict[str, Any]) -> str:
    text = _pct(c["accuracy"])
    if c["arm"] != c.get("_baseline"):
        text += " ✓" if c["noninferior"] else ""
        if c.get("gold_delta_mean") is not None:
            text += f" ({c['gold_delta_mean']:+.3g})"
    return text


def render_markdown(summary: dict[str, Any]) -> str:
    cells, base, margin = summary["cells"], summary["baseline"], summary["margin"]
    keys = {(c["task"], c["metric"], c["length"]) for c in cells}
    cols = sorted(keys, key=lambda k: (k[0], k[1], k[2] or 0))
    arms = [a["label"] for a in summary["arms"]]
    lines = [
        f"### evalkit sweep: {len(arms)} arms against `{base}`",
        "",
        f"Accuracy % per arm; ✓ = non-inferior to `{base}` at δ = {100 * margin:g} pp "
        "(Tango/Nam score test, one-sided 2.5%); in brackets the mean paired difference of the "
        "reference answer's log-probability (arm − baseline, nats; decode-mode teacher forcing).",
        "",
        "| arm | bits | " + " | ".join(f"{t} @ {'all' if n is None else n}" for t, _, n in cols) + " |",
        "|---|---:|" + "---:|" * len(cols),
    ]
    index = {(c["arm"], c["task"], c["metric"], c["length"]): c for c in cells}
    bits = {a["label"]: a["mantissa_bits"] for a in summary["arms"]}
    for arm in arms:
        row = []
        for t, m, n in cols:
            c = index.get((arm, t, m, n))
            row.append("" if c is None else _cell_text({**c, "_baseline": base}))
        lines.append(f"| `{arm}` | {bits[arm]} | " + " | ".join(row) + " |")
    ns = sorted({c["n"] for c in cells})
    lines += ["", f"Questions per cell: {', '.join(map(str, ns))}.", ""]
    lines += ["Tasks pooled per length (one metric per task): non-inferiority p-value (✓ shown):", ""]
    lens = sorted({v["length"] for v in summary["lengths"]}, key=lambda x: (x is None, x or 0))
    lines += ["| arm | " + " | ".join("all" if n is None else str(n) for n in lens) + " |"]
    lines += ["|---|" + "---:|" * len(lens)]
    pooled = {(v["arm"], v["length"]): v for v in summary["lengths"]}
    for arm in [a for a in arms if a != base]:
        row = []
        for n in lens:
            v = pooled.get((arm, n))
            row.append(
                ""
                if v is None
                else f"{v['noninferiority_p']:.3g}{' ✓' if v['noninferior'] else ''} (n={v['n']})"
            )
        lines.append(f"| `{arm}` | " + " | ".join(row) + " |")
    lines += ["", "**Bits of margin** per length:", ""]
    lines += [
        "| length | fewest non-inferior bits | consistent with the data | arm | fp16 (10) spare | "
        "bf16 (7) spare |",
        "|---|---:|---:|---|---:|---:|",
    ]
    if not summary["bits_of_margin"]:
        lines.append(
            "| – | no arm on the precision ladder (fp16, bf16, mN at the baseline's store points) | | | | |"
        )
    for length, b in summary["bits_of_margin"].items():
        few = "not shown" if b["fewest_bits"] is None else str(b["fewest_bits"])
        if b.get("no_room"):
            few = f"no room (`{base}` at 0%)"
        spare = lambda v: "–" if v is None else f"{v:+d}"  # noqa: E731
        arm = f"`{b['arm']}`" if b["arm"] else "–"
        lines.append(
            f"| {length} | {few} | {_bits_range(b)} | {arm} | {spare(b['fp16_spare'])} | "
            f"{spare(b['bf16_spare'])} |"
        )
    lines += [
        "",
        "The fewest bits is the last rung of the round-to-nearest ladder (fp16, bf16, mN) before the "
        'first arm that is not non-inferior at that length (tasks pooled); "not shown" means even the '
        "widest rung is not shown non-inferior at these question counts (add questions or widen δ); "
        '"no room" that the baseline gets every question wrong, so no arm can lose one (read the '
        "paired log-probability or the items instead).",
    ]
    lines += _headroom_lines(summary.get("exponent_headroom") or {})
    return "\n".join(lines) + "\n"


def _headroom_lines(headroom: dict[str, Any]) -> list[str]:
    """Bits of exponent headroom per arm and length (`evalkit.store.headroom`), beside the margin."""
    if not headroom:
        return []
    lens = sorted(
        {b for h in headroom.values() for b in h["lengths"]}, key=lambda b: (b == "all", b.zfill(9))
    )
    lines = [
        "",
        "**Bits of exponent headroom** per arm and length: log2(format max / largest |state| over "
        "the samples, any layer; none when a sample's state went non-finite); in brackets the largest "
        "finite |state| and the samples flagged overflow (the state reached the format's max):",
        "",
        "| arm | format max | " + " | ".join(lens) + " |",
        "|---|---:|" + "---:|" * len(lens),
    ]
    for arm, h in headroom.items():
        row = []
        for b in lens:
            c = h["lengths"].get(b)
            if c is None:
                row.append("")
                continue
            bits = f"none: {c['nonfinite']} non-finite" if c["nonfinite"] else _bits(c["headroom_bits"])
            top = "–" if c["max_abs"] is None else f"{c['max_abs']:.3g}"
            row.append(f"{bits} ({top}; {c['overflow']}/{c['n']} overflow)")
        lines.append(f"| `{arm}` | {h['format_max']:.4g} | " + " | ".join(row) + " |")
    return lines


def _bits(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _bits_range(b: dict[str, Any]) -> str:
    """'3–7 bits' (≤ 3 when open below); '–' for sweeps written before the range was recorded."""
    if b.get("no_room") or "fewest_consistent_bits" not in b:
        return "–"
    low, high = b["fewest_consistent_bits"], b["fewest_bits"]
    if low is None:
        return "none (the widest rung is shown inferior)"
    low_text = f"≤ {low}" if b.get("range_open_below") else str(low)
    return f"{low_text} to {'above the widest' if high is None else high}"


def write_report(out_dir: Path, summary: dict[str, Any]) -> None:
    (out_dir / "sweep.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out_dir / "sweep.md").write_text(render_markdown(summary))
