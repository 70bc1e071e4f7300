"""What the candidate's state format buys, beside what it costs: state bytes per sequence and the
sequences that fit, from the capacity each local run recorded (`manifest.backend.capacity`,
`evalkit.engine.capacity`). Shown only when both runs recorded one; sequence counts are compared
only when both were planned on the same memory budget (same device and settings)."""

from __future__ import annotations

from typing import Any


def _capacity(manifest: dict[str, Any]) -> dict[str, Any] | None:
    backend = manifest.get("backend")
    cap = backend.get("capacity") if isinstance(backend, dict) else None
    need = ("state_format", "state_bytes_per_sequence", "per_context")
    if (
        not isinstance(cap, dict)
        or any(k not in cap for k in need)
        or not isinstance(cap["per_context"], dict)
    ):
        return None
    return cap


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else b / a


def benefit_report(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any] | None:
    """The candidate's memory figures against the baseline's (ratios candidate / baseline), or None
    when either run did not record a capacity (a server run, or one written before it was recorded)."""
    base, cand = _capacity(baseline), _capacity(candidate)
    if base is None or cand is None:
        return None
    same_budget = base.get("pool_budget_bytes") is not None and base.get("pool_budget_bytes") == cand.get(
        "pool_budget_bytes"
    )
    contexts = []
    for ctx in sorted(set(base["per_context"]) & set(cand["per_context"]), key=int):
        b, c = base["per_context"][ctx], cand["per_context"][ctx]
        row = {
            "context": int(ctx),
            "bytes_per_sequence_baseline": b.get("bytes_per_sequence"),
            "bytes_per_sequence_candidate": c.get("bytes_per_sequence"),
            "bytes_ratio": _ratio(b.get("bytes_per_sequence"), c.get("bytes_per_sequence")),
            "max_sequences_baseline": b.get("max_sequences") if same_budget else None,
            "max_sequences_candidate": c.get("max_sequences") if same_budget else None,
        }
        row["sequences_ratio"] = _ratio(row["max_sequences_baseline"], row["max_sequences_candidate"])
        contexts.append(row)
    return {
        "baseline_format": base["state_format"],
        "candidate_format": cand["state_format"],
        "state_bytes_baseline": base["state_bytes_per_sequence"],
        "state_bytes_candidate": cand["state_bytes_per_sequence"],
        "state_bytes_ratio": _ratio(base["state_bytes_per_sequence"], cand["state_bytes_per_sequence"]),
        "same_budget": same_budget,
        "contexts": contexts,
    }


def _mb(n: float | None) -> str:
    return "–" if n is None else f"{n / 1e6:,.1f} MB"


def _x(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def benefit_markdown(benefit: dict[str, Any] | None) -> list[str]:
    if not benefit:
        return []
    lines = [
        "",
        "### What the state format buys",
        "",
        f"Recurrent state per sequence: {_mb(benefit['state_bytes_baseline'])} "
        f"({benefit['baseline_format']}) → {_mb(benefit['state_bytes_candidate'])} "
        f"({benefit['candidate_format']}), {_x(benefit['state_bytes_ratio'])}. A sequence also holds its "
        "attention cache, which the format does not shrink:",
        "",
        "| context | bytes per sequence | ratio | sequences that fit | ratio |",
        "|---|---|---|---|---|",
    ]
    for r in benefit["contexts"]:
        fits = "–"
        if r["max_sequences_baseline"] is not None:
            fits = f"{r['max_sequences_baseline']} → {r['max_sequences_candidate']}"
        lines.append(
            f"| {r['context']:,} | {_mb(r['bytes_per_sequence_baseline'])} → "
            f"{_mb(r['bytes_per_sequence_candidate'])} | {_x(r['bytes_ratio'])} | {fits} | "
            f"{_x(r['sequences_ratio'])} |"
        )
    if not benefit["same_budget"]:
        lines += [
            "",
            "Sequences that fit: not compared (the runs were not planned on the same GPU memory budget; "
            "a CPU run records bytes only).",
        ]
    return lines + [""]
