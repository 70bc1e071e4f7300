"""The A/A noise floor: how often the baseline disagrees with a replicate of itself, and whether
the candidate disagrees with the baseline more often than that (`evalkit.stats.discordance_excess`).

On the in-process engine the floor is 0 by construction: it decodes greedily and is
batch-invariant, so a replicate repeats every answer. A server (vLLM, SGLang) batches requests
nondeterministically, so its floor is measured with `--replicate`.
"""

from __future__ import annotations

from typing import Any

from evalkit import stats as st
from evalkit.compare.pairing import Pair, RowKey, pair_runs
from evalkit.errors import MismatchError
from evalkit.store import RunData

LOCAL_NOTE = (
    "A/A floor: 0 by construction: the baseline ran on the in-process engine (manifest backend "
    "`local`), which decodes greedily and is batch-invariant, so a replicate repeats every answer."
)


def _floor_note(baseline: RunData) -> str | None:
    return LOCAL_NOTE if baseline.backend == "local" else None


def replicate_report(
    baseline: RunData,
    replicate: RunData | None,
    ab_rows: dict[RowKey, list[Pair]],
    *,
    intersection: bool = False,
    allow_prompt_mismatch: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "replicate": None if replicate is None else replicate.path,
        "floor_by_construction": baseline.backend == "local",
        "note": _floor_note(baseline),
        "test": "one-sided exact conditional McNemar on paired disagreement indicators",
        "rows": [],
    }
    if replicate is None:
        return out
    try:
        aa = pair_runs(
            baseline, replicate, intersection=intersection, allow_prompt_mismatch=allow_prompt_mismatch
        )
    except MismatchError as exc:
        raise MismatchError(f"--replicate {replicate.path} (as the 'candidate' below): {exc}") from None
    for key, ab_pairs in ab_rows.items():
        aa_pairs = {p.doc_id: p for p in aa.rows.get(key, [])}
        shared = [p for p in ab_pairs if p.doc_id in aa_pairs]
        if not shared:
            continue
        aa_flags = [aa_pairs[p.doc_id].baseline != aa_pairs[p.doc_id].candidate for p in shared]
        ab_flags = [p.baseline != p.candidate for p in shared]
        res = st.discordance_excess(aa_flags, ab_flags)
        task, metric, length = key
        out["rows"].append({"task": task, "metric": metric, "length": length, **res.to_dict()})
    return out


def replicate_markdown(section: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if section["note"]:
        lines += ["", f"> {section['note']}"]
    if not section["rows"]:
        return lines
    lines += [
        "",
        "**A/A noise floor** (baseline vs its replicate; does the candidate disagree more?)",
        "",
        "| task | metric | length | n | A/A disagree | A/B disagree | A/B only / A/A only | "
        "p (one-sided exact) | mid-p | exceeds floor |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in section["rows"]:
        lines.append(
            f"| {r['task']} | {r['metric']} | {r['length'] or '–'} | {r['n']} | {r['aa_discordant']} | "
            f"{r['ab_discordant']} | {r['only_ab']} / {r['only_aa']} | {r['pvalue']:.3g} | {r['midp']:.3g} | "
            f"{'**yes**' if r['exceeds'] else 'no'} |"
        )
    lines += [
        "",
        f"<sub>Test: {section['test']} (questions where exactly one of the two pairs disagrees).</sub>",
    ]
    return lines
