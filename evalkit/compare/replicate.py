"""The A/A noise floor: how often the baseline disagrees with a replicate of itself, and whether
the candidate disagrees with the baseline more often than that (`evalkit.stats.discordance_excess`).

On the in-process engine a plain replicate is 0 by construction: it decodes greedily and is
batch-invariant, so it repeats every answer. A server (vLLM, SGLang) batches requests
nondeterministically, so its floor is measured with `--replicate`. A numerics floor (`--floor`) is
the baseline arm under numerics a user already accepts (another registered kernel, the servers'
prefill products, another device; for a server, the same server and state dtype at another
concurrency or request order): the report says what differs, and sets the candidate's
disagreements and its departing generations against the floor's, each with the same test. A
generation departs when its token ids differ, or, where a side has none (a server), its text.
"""

from __future__ import annotations

from typing import Any

from evalkit import stats as st
from evalkit.backends.request_order import describe_order
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
    if _server(baseline) and _server(floor):
        out += server_differences(da, db)
    return out


def _server(run: RunData) -> bool:
    backend = run.manifest.get("backend")
    return isinstance(backend, dict) and backend.get("name") == "openai"


def server_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What a server replicate changes: the servers, the concurrency, the request order."""
    out = []
    if a.get("base_urls") and b.get("base_urls") and a["base_urls"] != b["base_urls"]:
        out.append(f"servers {', '.join(a['base_urls'])} → {', '.join(b['base_urls'])}")
    ca, cb = a.get("concurrency_per_server"), b.get("concurrency_per_server")
    if ca is not None and cb is not None and ca != cb:
        out.append(f"concurrency {ca} → {cb}")
    oa, ob = describe_order(a.get("request_order")), describe_order(b.get("request_order"))
    if oa != ob:
        out.append(f"order {oa} → {ob}" if oa != "given" else f"order {ob}")
    return out


def _state_dtypes(run: RunData) -> set[str]:
    """The state dtypes a server run's arm names and its servers report (None: not known)."""
    out = set()
    arm = run.manifest.get("arm")
    if isinstance(arm, dict) and isinstance(arm.get("state_dtype"), str):
        out.add(arm["state_dtype"])
    backend = run.manifest.get("backend") or {}
    for config in (backend.get("server_config") or {}).values() if isinstance(backend, dict) else ():
        if isinstance(config, dict) and isinstance(config.get("state_dtype"), str):
            out.add(config["state_dtype"])
    return out


def check_server_floor(baseline: RunData, floor: RunData) -> None:
    """A server floor replicates the baseline: the same model and state dtype (MismatchError if not)."""
    if not (_server(baseline) or _server(floor)):
        return
    if _server(baseline) != _server(floor):
        raise MismatchError(
            f"--floor {floor.path}: one run is a server run and the other is not; a server's numerics "
            "floor is the baseline's server again at another --concurrency or --request-order"
        )
    ma, mb = (str((r.manifest.get("backend") or {}).get("model")) for r in (baseline, floor))
    sa, sb = _state_dtypes(baseline), _state_dtypes(floor)
    why = []
    if ma != mb:
        why.append(f"model {ma} → {mb}")
    if sa and sb and sa != sb:
        why.append(f"state dtype {'/'.join(sorted(sa))} → {'/'.join(sorted(sb))}")
    if why:
        raise MismatchError(
            f"--floor {floor.path} is not a replicate of the baseline ({'; '.join(why)}): a server's "
            "numerics floor is the same server and state dtype at another --concurrency or --request-order"
        )


def _floor_note(baseline: RunData, replicate: RunData | None) -> str | None:
    if replicate is None:
        return LOCAL_NOTE if baseline.backend == "local" else None
    diffs = numerics_differences(baseline, replicate)
    if diffs:
        return "Numerics floor: the baseline arm again with " + "; ".join(diffs) + "."
    return LOCAL_NOTE if baseline.backend == "local" else None


def _departed(pair: Pair) -> bool | None:
    """Whether the two generations differ token for token, or by their text where a side recorded
    no token ids (a server); None when a side recorded neither."""
    sides = (pair.baseline_sample or {}, pair.candidate_sample or {})
    a, b = (s.get("generated_ids") for s in sides)
    if isinstance(a, list) and isinstance(b, list):
        return first_departure(a, b) is not None
    ta, tb = (s.get("response") for s in sides)
    if isinstance(ta, str) and isinstance(tb, str):
        return ta != tb
    return None


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
    check_server_floor(baseline, replicate)
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
    lines += departure_sentences(section)
    lines += [
        "",
        f"<sub>Test: {section['test']} (questions where exactly one of the two pairs disagrees).</sub>",
    ]
    return lines


def departure_sentences(section: dict[str, Any]) -> list[str]:
    """Per cell, in words: the candidate's departing generations against the floor's."""
    out = []
    for r in section["rows"]:
        dep = r.get("departures")
        if not dep:
            continue
        name = r["task"] + ("" if r["length"] is None else f" @ {r['length']}") + f" ({r['metric']})"
        verdict = "**more than the floor**" if dep["exceeds"] else "no more than the floor"
        out.append(
            f"- {name}: the candidate's generations depart from the baseline's on {dep['ab_discordant']} "
            f"of {dep['n']} questions, the floor run's on {dep['aa_discordant']}: {verdict} "
            f"(one-sided exact p {dep['pvalue']:.3g})."
        )
    return [""] + out if out else []
