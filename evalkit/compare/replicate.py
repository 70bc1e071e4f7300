"""The A/A noise floor: how often the baseline disagrees with a replicate of itself, and whether
the candidate disagrees with the baseline more often than that (`evalkit.stats.discordance_excess`).

On the in-process engine a plain replicate is 0 by construction: it decodes greedily and is
batch-invariant, so it repeats every answer. A server (vLLM, SGLang) batches requests
nondeterministically, so its floor is measured with `--replicate`. A numerics floor (`--floor`) is
the baseline arm under numerics a user already accepts (another registered kernel, the servers'
prefill products, another device): the report says what differs, and sets the candidate's
disagreements and its departing generations against the floor's, each with the same test.
"""

from __future__ import annotations

from typing import Any

from evalkit import stats as st
from evalkit.compare.logprob import first_departure
from evalkit.compare.pairing import Pair, RowKey, pair_runs
from evalkit.errors import MismatchError
from evalkit.store import RunData

LOCAL_NOTE = (
    "A/A floor: 0 by construction: the baseline ran on the in-process engine (manifest backend "
    "`local`), which decodes greedily and is batch-invariant, so a replicate repeats every answer."
)


def numerics_differences(baseline: RunData, floor: RunData) -> list[str]:
    """What the floor run changes besides the state: its store points (an fp32 state stored at other
    points is the same state computed in other chunks), its kernel choices and its device."""
    out = []
    arm_a, arm_b = baseline.manifest.get("arm") or {}, floor.manifest.get("arm") or {}
    if isinstance(arm_a, dict) and isinstance(arm_b, dict):
        for key in ("prefill_chunk_size", "intra_chunk_dtype"):
            if arm_a.get(key) != arm_b.get(key):
                out.append(f"arm.{key} {arm_a.get(key)!r} → {arm_b.get(key)!r}")
    a, b = baseline.manifest.get("kernels") or {}, floor.manifest.get("kernels") or {}
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key != "label" and a.get(key) != b.get(key):
                out.append(f"kernels.{key} {a.get(key)!r} → {b.get(key)!r}")
    da, db = (r.manifest.get("backend") or {} for r in (baseline, floor))
    if isinstance(da, dict) and isinstance(db, dict) and da.get("device") != db.get("device"):
        out.append(f"device {da.get('device')!r} → {db.get('device')!r}")
    return out


def _floor_note(baseline: RunData, replicate: RunData | None) -> str | None:
    if replicate is None:
        return LOCAL_NOTE if baseline.backend == "local" else None
    diffs = numerics_differences(baseline, replicate)
    if diffs:
        return "Numerics floor: the baseline arm again with " + "; ".join(diffs) + "."
    return LOCAL_NOTE if baseline.backend == "local" else None


def _departed(pair: Pair) -> bool | None:
    """Whether the two generations differ token for token (None: a side did not record its ids)."""
    a, b = (
        None if s is None else s.get("generated_ids") for s in (pair.baseline_sample, pair.candidate_sample)
    )
    if not isinstance(a, list) or not isinstance(b, list):
        return None
    return first_departure(a, b) is not None


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
        "floor_by_construction": baseline.backend == "local"
        and (replicate is None or not numerics_differences(baseline, replicate)),
        "floor_differs_in": [] if replicate is None else numerics_differences(baseline, replicate),
        "note": _floor_note(baseline, replicate),
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
        row = {"task": task, "metric": metric, "length": length, **res.to_dict(), "departures": None}
        ab_dep = [_departed(p) for p in shared]
        aa_dep = [_departed(aa_pairs[p.doc_id]) for p in shared]
        both = [(x, y) for x, y in zip(aa_dep, ab_dep) if x is not None and y is not None]
        if both:
            dep = st.discordance_excess([x for x, _ in both], [y for _, y in both])
            row["departures"] = dep.to_dict()
        out["rows"].append(row)
    return out


def replicate_markdown(section: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if section["note"]:
        lines += ["", f"> {section['note']}"]
    if not section["rows"]:
        return lines
    lines += [
        "",
        "**A/A noise floor** (baseline vs its replicate or floor run; does the candidate disagree more?)",
        "",
        "| task | metric | length | n | A/A disagree | A/B disagree | A/B only / A/A only | "
        "p (one-sided exact) | mid-p | exceeds floor | generations depart A/A / A/B (p) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in section["rows"]:
        dep = r.get("departures")
        dep_text = "not recorded"
        if dep:
            dep_text = (
                f"{dep['aa_discordant']} / {dep['ab_discordant']} of {dep['n']} ({dep['pvalue']:.3g}"
                f"{', **more than the floor**' if dep['exceeds'] else ''})"
            )
        lines.append(
            f"| {r['task']} | {r['metric']} | {r['length'] or '–'} | {r['n']} | {r['aa_discordant']} | "
            f"{r['ab_discordant']} | {r['only_ab']} / {r['only_aa']} | {r['pvalue']:.3g} | {r['midp']:.3g} | "
            f"{'**yes**' if r['exceeds'] else 'no'} | {dep_text} |"
        )
    lines += [
        "",
        f"<sub>Test: {section['test']} (questions where exactly one of the two pairs disagrees).</sub>",
    ]
    return lines
