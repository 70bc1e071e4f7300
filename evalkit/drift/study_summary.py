"""One mode of a drift study, prompt by prompt, and its summary across prompts.

`ModeState` collects what each prompt measured (bucket means with exact p50/p99/max, per-layer
state errors, per-prompt scalars and growth slopes over every fitting range); `summarize_mode`,
`across_bucket_rows` and `across_state_rows` turn them into across-prompt figures
(`evalkit.drift.across`): means with t-CIs, exact quantiles across prompts, exponents with
sensitivity rows, and each arm's ratio to the A/A floor in the last position bucket.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.drift.across import mean_ci, ols_slope, rate_slope, ratio_ci, summarize_slopes
from evalkit.drift.fit_points import FitPoint, fit_points
from evalkit.drift.floor import AA_ARM
from evalkit.drift.result import (
    CI_FIGURES,
    DriftArmSummary,
    DriftFloor,
    DriftModeSummary,
    DriftPromptResult,
    FloorRatio,
    LastBucketRatio,
    MeanCI,
)
from evalkit.drift.teacher_forced import TOKEN_METRICS, TeacherForcedResult

FIT_STARTS = (1024, 4096, 16384)  # sensitivity rows: fits from these positions on, where they fit
GROWTH_METRICS = (*TOKEN_METRICS, "state_rel_fro")


def fit_from(length: int, mode: str, chunk_size: int | None) -> int:
    """First position of the main growth fits: skip the first ~1% of positions (single-digit
    counts per bucket) and, in prefill mode, the first chunk, which never reads a rounded state."""
    start = max(32, length // 128)
    if mode == "prefill" and chunk_size:
        start = max(start, chunk_size + 1)
    return start


@dataclass
class ModeState:
    """What one mode has measured so far, prompt by prompt."""

    mode: str
    length: int
    chunk_size: int | None
    bucket_rows: list[dict] = field(default_factory=list)  # per prompt × arm × metric × bucket
    state_rows: list[dict] = field(default_factory=list)  # per prompt × arm × checkpoint × layer
    prompt_rows: list[dict] = field(default_factory=list)  # per prompt × arm: scalars and slopes
    seconds: list[float] = field(default_factory=list)  # wall seconds per prompt
    stopped_by_budget: bool = False


def per_prompt_rows(res: TeacherForcedResult, prompt: int) -> tuple:
    """(bucket rows, state rows, scalar rows) of one prompt's traces. Growth slopes are not kept
    here: `prompt_slopes` fits them from the bucket and state rows whenever a summary is made, so
    a saved study can be refitted when the fitting improves."""
    buckets, states, scalars = [], [], []
    for arm, tr in res.traces.items():
        for metric in TOKEN_METRICS:
            st = tr.buckets[metric]
            for b, r in zip(np.flatnonzero(st.count + st.nonfinite), st.rows()):
                buckets.append(
                    {"prompt": prompt, "mode": res.mode, "arm": arm, "metric": metric, "bucket": int(b), **r}
                )
        by_pos = defaultdict(list)
        for r in tr.states:
            states.append({"prompt": prompt, "mode": res.mode, "arm": arm, **r})
            by_pos[r["position"]].append(r["rel_fro"])
        state_mean = [float(np.mean(by_pos[p])) for p in sorted(by_pos)]
        kl, top, dn = (tr.buckets[m] for m in ("kl", "top1_disagree", "abs_dnll"))
        has_kl = bool(kl.count.sum())
        row = DriftPromptResult(
            prompt=prompt,
            mode=res.mode,
            arm=arm,
            mean_kl=float(kl.total.sum() / kl.count.sum()) if has_kl else None,
            p99_kl=kl.quantile(0.99, np.arange(len(kl.count))) if has_kl else None,  # exact
            max_kl=float(kl.maximum.max()) if has_kl else None,
            top1_agreement=1.0 - float(top.total.sum() / top.count.sum()) if top.count.sum() else None,
            mean_abs_dnll=float(dn.total.sum() / dn.count.sum()) if dn.count.sum() else None,
            ln_ppl_ratio=tr.sum_dnll / tr.n_nll if tr.n_nll else None,
            state_rel_err_end=state_mean[-1] if state_mean else None,
            state_max_abs=max((r["max_abs"] for r in tr.states), default=None),
            nonfinite=tr.nonfinite_logits + sum(r["n_nonfinite"] for r in tr.states),
            n_over_fp16=sum(r["n_over_fp16"] for r in tr.states),
            seconds=tr.seconds,
        )
        scalars.append(row.to_dict())
    return buckets, states, scalars


def prompt_points(ms: ModeState) -> dict[tuple[str, int, str], list[FitPoint]]:
    """Per arm × prompt × token metric: the prompt's fit points (`evalkit.drift.fit_points`)."""
    groups: dict[tuple[str, int, str], list[dict]] = defaultdict(list)
    for r in ms.bucket_rows:
        groups[(r["arm"], r["prompt"], r["metric"])].append(r)
    return {k: fit_points(rows, ms.chunk_size) for k, rows in groups.items()}


def prompt_slopes(
    ms: ModeState,
    ranges: dict[str, tuple[float, float]],
    points: dict[tuple[str, int, str], list[FitPoint]] | None = None,
) -> dict[tuple[str, int], dict]:
    """Per arm × prompt: `slope:<metric>:<range>` and `why:<metric>:<range>` for every growth
    metric and fitting range: OLS on the fit points (token metrics; top-1 flips by Poisson
    regression on their counts) and on the mean-over-layers state error at each checkpoint.
    `points`: `prompt_points(ms)` when the caller has them already."""
    points = prompt_points(ms) if points is None else points
    states: dict[tuple[str, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in ms.state_rows:
        states[(r["arm"], r["prompt"])][r["position"]].append(r["rel_fro"])
    out: dict[tuple[str, int], dict] = {}
    for r in ms.prompt_rows:
        key = (r["arm"], r["prompt"])
        by_pos = states.get(key, {})
        s_pos = np.array(sorted(by_pos), dtype=np.float64)
        s_mean = np.array([np.mean(by_pos[p]) for p in sorted(by_pos)])
        row: dict[str, Any] = {}
        for name, (lo, hi) in ranges.items():
            for metric in GROWTH_METRICS:
                if metric == "state_rel_fro":
                    s, why = ols_slope(s_pos, s_mean, lo, hi)
                else:
                    pts = [p for p in points.get((*key, metric), []) if p.n]
                    pos = np.array([p.position for p in pts])
                    if metric == "top1_disagree":
                        events = np.array([round(p.total) for p in pts])
                        s, why = rate_slope(pos, events, np.array([p.n for p in pts]), lo, hi)
                    else:
                        s, why = ols_slope(pos, np.array([p.mean for p in pts]), lo, hi)
                row[f"slope:{metric}:{name}"] = s
                row[f"why:{metric}:{name}"] = why
        out[key] = row
    return out


def prompt_rows_with_slopes(ms: ModeState, ranges: dict[str, tuple[float, float]]) -> list[dict]:
    """The per-prompt scalar rows with their slopes as fitted now (for prompt_results.csv)."""
    slopes = prompt_slopes(ms, ranges)
    return [{**r, **slopes[(r["arm"], r["prompt"])]} for r in ms.prompt_rows]


def fit_ranges(
    length: int, mode: str, chunk_size: int | None, starts=FIT_STARTS
) -> dict[str, tuple[float, float]]:
    """The main fitting range ([fit_from, L]) and a sensitivity row for each start that leaves
    at least MIN_SPAN x of positions."""
    from evalkit.drift.growth import MIN_SPAN

    out = {"main": (float(fit_from(length, mode, chunk_size)), float(length))}
    for s in starts:
        if s > out["main"][0] and s * MIN_SPAN <= length:
            out[f"from_{s}"] = (float(s), float(length))
    return out


def summarize_mode(ms: ModeState, arms: list[str], floor: bool, starts=FIT_STARTS) -> DriftModeSummary:
    """The across-prompt summary of one mode (see the module doc of `evalkit.drift.across`)."""
    ranges = fit_ranges(ms.length, ms.mode, ms.chunk_size, starts)
    prompts = sorted({r["prompt"] for r in ms.prompt_rows})
    rows = {(r["arm"], r["prompt"]): DriftPromptResult.from_dict(r) for r in ms.prompt_rows}
    points = prompt_points(ms)
    slopes = prompt_slopes(ms, ranges, points)
    last_kl = _last_point_kl(points)
    out = {}
    for arm in arms:
        keys = [(arm, p) for p in prompts if (arm, p) in rows]
        mine = [rows[k] for k in keys]
        growth = {
            metric: {
                key: summarize_slopes(
                    metric,
                    [(slopes[k][f"slope:{metric}:{key}"], slopes[k][f"why:{metric}:{key}"]) for k in keys],
                    lo,
                    hi,
                )
                for key, (lo, hi) in ranges.items()
            }
            for metric in GROWTH_METRICS
        }
        has_floor = floor and arm != AA_ARM and AA_ARM in arms
        out[arm] = DriftArmSummary(
            **{k: MeanCI(**mean_ci([getattr(r, k) for r in mine])) for k in CI_FIGURES},
            max_kl=max((r.max_kl for r in mine if r.max_kl is not None), default=None),
            state_max_abs=max((r.state_max_abs for r in mine if r.state_max_abs is not None), default=None),
            nonfinite=sum(r.nonfinite for r in mine),
            n_over_fp16=sum(r.n_over_fp16 for r in mine),
            growth=growth,
            floor=_floor(arm, prompts, rows, last_kl) if has_floor else None,
        )
    return DriftModeSummary(
        length=ms.length,
        chunk_size=ms.chunk_size,
        n_prompts=len(prompts),
        stopped_by_budget=ms.stopped_by_budget,
        fit_ranges={k: list(v) for k, v in ranges.items()},
        seconds_per_prompt=MeanCI(**mean_ci(ms.seconds)),
        arms=out,
        last_bucket=_last_point_range(points),
    )


def _floor(
    arm: str,
    prompts: list[int],
    rows: dict[tuple[str, int], DriftPromptResult],
    last_kl: dict[str, dict[int, float]],
) -> DriftFloor:
    """The arm's KL over the A/A floor's: in the last bucket (paired by prompt) and overall."""
    end, den = last_kl.get(arm, {}), last_kl.get(AA_ARM, {})
    common = sorted(set(end) & set(den))
    at_end = LastBucketRatio(
        **ratio_ci([end[p] for p in common], [den[p] for p in common]),
        arm_mean=mean_ci([end[p] for p in common])["mean"],
        floor_mean=mean_ci([den[p] for p in common])["mean"],
    )
    overall = ratio_ci(
        [rows[(arm, p)].mean_kl for p in prompts], [rows[(AA_ARM, p)].mean_kl for p in prompts]
    )
    return DriftFloor(at_end, FloorRatio(**overall))


def _last_kl_points(points: dict[tuple[str, int, str], list[FitPoint]]) -> dict[tuple[str, int], FitPoint]:
    """Per arm × prompt: its last KL fit point holding values (where "at L1" is read: the last
    bucket, with a one-position sliver merged into it)."""
    out = {}
    for (arm, prompt, metric), pts in points.items():
        held = [p for p in pts if p.n]
        if metric == "kl" and held:
            out[(arm, prompt)] = held[-1]
    return out


def _last_point_kl(points: dict[tuple[str, int, str], list[FitPoint]]) -> dict[str, dict[int, float]]:
    """Per arm and prompt: the mean KL of its last fit point."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for (arm, prompt), p in _last_kl_points(points).items():
        out[arm][prompt] = p.mean
    return out


def _last_point_range(points: dict[tuple[str, int, str], list[FitPoint]]) -> list[int] | None:
    """The positions of those last points (the one reaching furthest, across prompts)."""
    last = list(_last_kl_points(points).values())
    if not last:
        return None
    p = max(last, key=lambda p: p.pos_hi)
    return [p.pos_lo, p.pos_hi]


def across_bucket_rows(ms: ModeState) -> list[dict]:
    """Per arm × metric × bucket: the mean over prompts of the per-prompt bucket means with its
    t-CI, exact quantiles across prompts, the mean of the per-prompt exact p99s and the max."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in ms.bucket_rows:
        groups[(r["arm"], r["metric"], r["bucket"])].append(r)
    out = []
    for (arm, metric, b), rs in sorted(groups.items()):
        c = mean_ci([r["mean"] for r in rs])
        p99 = mean_ci([r["p99"] for r in rs])
        out.append(
            {
                "mode": ms.mode,
                "arm": arm,
                "metric": metric,
                "bucket": b,
                "pos_lo": rs[0]["pos_lo"],
                "pos_hi": rs[0]["pos_hi"],
                "position": rs[0]["position"],
                "n_prompts": c["n"],
                "mean": c["mean"],
                "sd_prompts": c["sd"],
                "ci_low": c["ci_low"],
                "ci_high": c["ci_high"],
                "p50_prompts": c["p50"],
                "max_prompts": c["max"],
                "p99": p99["mean"],
                "p99_ci_low": p99["ci_low"],
                "p99_ci_high": p99["ci_high"],
                "max": max((r["max"] for r in rs if r["max"] is not None), default=None),
                "zeros": sum(r["zeros"] for r in rs),
                "nonfinite": sum(r["nonfinite"] for r in rs),
            }
        )
    return out


def across_state_rows(ms: ModeState) -> list[dict]:
    """Per arm × checkpoint: per-prompt mean-over-layers state error, summarised across prompts."""
    per: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in ms.state_rows:
        per[(r["arm"], r["position"])][r["prompt"]].append(r["rel_fro"])
    out = []
    for (arm, pos), by_prompt in sorted(per.items()):
        c = mean_ci([float(np.mean(v)) for v in by_prompt.values()])
        out.append(
            {
                "mode": ms.mode,
                "arm": arm,
                "position": pos,
                **{k: c[k] for k in ("n", "mean", "sd", "ci_low", "ci_high", "max")},
            }
        )
    return out
