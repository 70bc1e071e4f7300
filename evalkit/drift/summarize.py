"""Turn the drivers' traces into the rows and the summary a drift run directory holds."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from evalkit.drift.growth import fit_growth, fit_rate_growth
from evalkit.drift.teacher_forced import TOKEN_METRICS, ArmTrace, TeacherForcedResult

METRIC_LABELS = {
    "kl": "KL(fp32‖arm)",
    "top1_disagree": "top-1 disagreement",
    "abs_dnll": "|ΔNLL|",
    "state_rel_fro": "state relative error",
}


def fit_from(length: int, mode: str, chunk_size: int | None) -> int:
    """First position of the growth fits: skip the first ~1% of positions (single-digit counts
    per bucket) and, in prefill mode, the first chunk, which never reads a rounded state."""
    start = max(32, length // 128)
    if mode == "prefill" and chunk_size:
        start = max(start, chunk_size + 1)
    return start


def bucket_rows(res: TeacherForcedResult) -> list[dict]:
    rows = []
    for arm, tr in res.traces.items():
        for metric in TOKEN_METRICS:
            for r in tr.buckets[metric].rows():
                rows.append({"mode": res.mode, "arm": arm, "metric": metric, **r})
    return rows


def state_rows(res: TeacherForcedResult) -> list[dict]:
    return [{"mode": res.mode, "arm": arm, **row} for arm, tr in res.traces.items() for row in tr.states]


def _state_by_position(tr: ArmTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    by = defaultdict(list)
    for r in tr.states:
        by[r["position"]].append(r["rel_fro"])
    pos = np.array(sorted(by), dtype=np.float64)
    mean = np.array([np.mean(by[p]) for p in sorted(by)])
    mx = np.array([np.max(by[p]) for p in sorted(by)])
    return pos, mean, mx


def arm_summary(res: TeacherForcedResult, tr: ArmTrace) -> dict:
    start = fit_from(res.length, res.mode, res.chunk_size)
    out: dict = {}
    b = tr.buckets
    out["kl"] = b["kl"].overall()
    top = b["top1_disagree"]
    n_top = int(top.count.sum())
    out["top1_agreement"] = 1.0 - float(top.total.sum()) / n_top if n_top else None
    out["top1_n"] = n_top
    out["abs_dnll"] = b["abs_dnll"].overall()
    out["ln_ppl_ratio"] = tr.sum_dnll / tr.n_nll if tr.n_nll else None
    out["nll_fp32"] = tr.sum_nll_ref / tr.n_nll if tr.n_nll else None
    out["nonfinite_logits"] = tr.nonfinite_logits
    growth = {}
    for metric in TOKEN_METRICS:
        s = b[metric]
        if metric == "top1_disagree":  # a 0/1 event: Poisson regression of the flip counts
            growth[metric] = fit_rate_growth(
                s.position(),
                s.total,
                s.count,
                metric=metric,
                label=METRIC_LABELS[metric],
                min_position=start,
                pos_lo=s.edges[:-1],
                pos_hi=s.edges[1:] - 1,
            ).to_dict()
            continue
        growth[metric] = fit_growth(
            s.position(),
            s.mean(),
            s.std(),
            s.count,
            metric=metric,
            label=METRIC_LABELS[metric],
            min_position=start,
            pos_lo=s.edges[:-1],
            pos_hi=s.edges[1:] - 1,
        ).to_dict()
    if tr.states:
        pos, mean, mx = _state_by_position(tr)
        last = [r for r in tr.states if r["position"] == pos.max()]
        out["state"] = {
            "final_position": int(pos.max()),
            "final_rel_fro_mean": float(np.mean([r["rel_fro"] for r in last])),
            "final_rel_fro_max": float(np.max([r["rel_fro"] for r in last])),
            "worst_layer": int(max(last, key=lambda r: r["rel_fro"])["layer"]),
            "max_abs": float(max(r["max_abs"] for r in tr.states)),
            "max_abs_ref": float(max(r["max_abs_ref"] for r in tr.states)),
            "n_over_fp16": int(sum(r["n_over_fp16"] for r in tr.states)),
            "n_nonfinite": int(sum(r["n_nonfinite"] for r in tr.states)),
        }
        growth["state_rel_fro"] = fit_growth(
            pos,
            mean,
            np.full_like(mean, np.nan),
            np.ones_like(mean),
            metric="state_rel_fro",
            label=METRIC_LABELS["state_rel_fro"],
            min_position=start,
            min_count=1,
        ).to_dict()
    out["growth"] = growth
    out["seconds"] = tr.seconds
    out["tokens_per_second"] = res.length / tr.seconds if tr.seconds > 0 else None
    return out


def teacher_forced_summary(res: TeacherForcedResult) -> dict:
    return {
        "length": res.length,
        "requested_length": res.requested_length or res.length,
        "stopped_early": bool(res.requested_length and res.length < res.requested_length),
        "chunk_size": res.chunk_size,
        "fit_from": fit_from(res.length, res.mode, res.chunk_size),
        "blocks": res.block_count,
        "seconds_fp32": res.seconds_fp32,
        "wall_seconds": res.wall_seconds,
        "arms": {arm: arm_summary(res, tr) for arm, tr in res.traces.items()},
    }
