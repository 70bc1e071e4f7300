"""A drift study: N independent prompts × modes × arms (plus the A/A floor), summarised across prompts.

For each mode, prompt after prompt, every arm runs in lockstep with an fp32 arm
(`teacher_forced.run_teacher_forced`); per prompt, each bucketed metric's bucket means, exact
p50/p99/max, the per-layer state errors and the per-prompt growth exponents are kept, and after
every prompt the across-prompt summary is rewritten (a run stopped by its budget or killed keeps
the prompts it finished). A mode stops taking new prompts when its budget would be exceeded by
one more (the duration of the last prompt is the estimate); every prompt it takes it finishes, so
all prompts cover the same positions.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evalkit.drift import rundir
from evalkit.drift.across import mean_ci, ols_slope, rate_slope, ratio_ci, summarize_slopes
from evalkit.drift.driver import tokens_sha256
from evalkit.drift.floor import AA_ARM, AA_HOW, session_opener
from evalkit.drift.prompts import Prompt
from evalkit.drift.session import DriftModel
from evalkit.drift.teacher_forced import TOKEN_METRICS, TeacherForcedResult, run_teacher_forced

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
class StudyConfig:
    arms: list[str]
    modes: list[str] = field(default_factory=lambda: ["prefill", "decode"])
    chunk_size: int = 1024
    decode_block: int = 256
    per_octave: int = 2
    max_bytes: int = 256 << 20
    floor: bool = True  # add the A/A arm
    fit_starts: tuple[int, ...] = FIT_STARTS
    generate: int = 0  # free running on the first prompt: greedy tokens per arm (0 = skip)
    prompt_length: int = 1024  # free running: its first tokens are the prompt
    title: str = ""

    def all_arms(self) -> list[str]:
        return [*self.arms, AA_ARM] if self.floor and AA_ARM not in self.arms else list(self.arms)


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


def _per_prompt(res: TeacherForcedResult, prompt: int, ranges: dict[str, tuple[float, float]]) -> tuple:
    buckets, states, scalars = [], [], []
    for arm, tr in res.traces.items():
        series = {}
        for metric in TOKEN_METRICS:
            st = tr.buckets[metric]
            for b, r in zip(np.flatnonzero(st.count + st.nonfinite), st.rows()):
                buckets.append(
                    {"prompt": prompt, "mode": res.mode, "arm": arm, "metric": metric, "bucket": int(b), **r}
                )
            series[metric] = (st.position(), st.mean(), st.total, st.count)
        by_pos = defaultdict(list)
        for r in tr.states:
            states.append({"prompt": prompt, "mode": res.mode, "arm": arm, **r})
            by_pos[r["position"]].append(r["rel_fro"])
        pos = np.array(sorted(by_pos), dtype=np.float64)
        state_mean = np.array([np.mean(by_pos[p]) for p in sorted(by_pos)])
        row: dict[str, Any] = {"prompt": prompt, "mode": res.mode, "arm": arm}
        kl = tr.buckets["kl"]
        row["mean_kl"] = float(kl.total.sum() / kl.count.sum()) if kl.count.sum() else None
        row["p99_kl"] = kl.quantile(0.99, np.arange(len(kl.count))) if kl.count.sum() else None  # exact
        row["max_kl"] = float(kl.maximum.max()) if kl.count.sum() else None
        top = tr.buckets["top1_disagree"]
        row["top1_agreement"] = 1.0 - float(top.total.sum() / top.count.sum()) if top.count.sum() else None
        dn = tr.buckets["abs_dnll"]
        row["mean_abs_dnll"] = float(dn.total.sum() / dn.count.sum()) if dn.count.sum() else None
        row["ln_ppl_ratio"] = tr.sum_dnll / tr.n_nll if tr.n_nll else None
        row["state_rel_err_end"] = float(state_mean[-1]) if state_mean.size else None
        row["state_max_abs"] = max((r["max_abs"] for r in tr.states), default=None)
        row["nonfinite"] = tr.nonfinite_logits + sum(r["n_nonfinite"] for r in tr.states)
        row["n_over_fp16"] = sum(r["n_over_fp16"] for r in tr.states)
        row["seconds"] = tr.seconds
        for key, (lo, hi) in ranges.items():
            for metric in GROWTH_METRICS:
                if metric == "state_rel_fro":
                    s, why = ols_slope(pos, state_mean, lo, hi)
                elif metric == "top1_disagree":
                    p, _, events, n = series[metric]
                    s, why = rate_slope(p, events, n, lo, hi)
                else:
                    p, m, _, _ = series[metric]
                    s, why = ols_slope(p, m, lo, hi)
                row[f"slope:{metric}:{key}"] = s
                row[f"why:{metric}:{key}"] = why
        scalars.append(row)
    return buckets, states, scalars


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


def summarize_mode(ms: ModeState, arms: list[str], floor: bool, starts=FIT_STARTS) -> dict:
    """The across-prompt summary of one mode (see the module doc of `evalkit.drift.across`)."""
    ranges = fit_ranges(ms.length, ms.mode, ms.chunk_size, starts)
    prompts = sorted({r["prompt"] for r in ms.prompt_rows})
    out: dict[str, Any] = {
        "length": ms.length,
        "chunk_size": ms.chunk_size,
        "n_prompts": len(prompts),
        "stopped_by_budget": ms.stopped_by_budget,
        "fit_ranges": {k: list(v) for k, v in ranges.items()},
        "seconds_per_prompt": mean_ci(ms.seconds),
        "arms": {},
    }
    rows = {(r["arm"], r["prompt"]): r for r in ms.prompt_rows}
    last_bucket = _last_bucket_kl(ms)
    for arm in arms:
        mine = [rows[(arm, p)] for p in prompts if (arm, p) in rows]
        a: dict[str, Any] = {
            k: mean_ci([r[k] for r in mine])
            for k in (
                "mean_kl",
                "p99_kl",
                "top1_agreement",
                "mean_abs_dnll",
                "ln_ppl_ratio",
                "state_rel_err_end",
            )
        }
        a["max_kl"] = max((r["max_kl"] for r in mine if r["max_kl"] is not None), default=None)
        a["state_max_abs"] = max(
            (r["state_max_abs"] for r in mine if r["state_max_abs"] is not None), default=None
        )
        a["nonfinite"] = sum(r["nonfinite"] for r in mine)
        a["n_over_fp16"] = sum(r["n_over_fp16"] for r in mine)
        a["growth"] = {
            metric: {
                key: summarize_slopes(
                    metric, [(r[f"slope:{metric}:{key}"], r[f"why:{metric}:{key}"]) for r in mine], lo, hi
                ).to_dict()
                for key, (lo, hi) in ranges.items()
            }
            for metric in GROWTH_METRICS
        }
        if floor and arm != AA_ARM and AA_ARM in arms:
            end = last_bucket.get(arm, {})
            den = last_bucket.get(AA_ARM, {})
            common = sorted(set(end) & set(den))
            at_end = ratio_ci([end[p] for p in common], [den[p] for p in common])
            at_end["arm_mean"] = mean_ci([end[p] for p in common])["mean"]
            at_end["floor_mean"] = mean_ci([den[p] for p in common])["mean"]
            overall = ratio_ci(
                [rows[(arm, p)]["mean_kl"] for p in prompts], [rows[(AA_ARM, p)]["mean_kl"] for p in prompts]
            )
            a["floor"] = {"kl_last_bucket": at_end, "kl_overall": overall}
        out["arms"][arm] = a
    out["last_bucket"] = _last_bucket_range(ms)
    return out


def _last_bucket_kl(ms: ModeState) -> dict[str, dict[int, float]]:
    """Per arm and prompt: the mean KL of the last position bucket (where 'at L1' is read)."""
    kl = [r for r in ms.bucket_rows if r["metric"] == "kl" and r["mean"] is not None]
    if not kl:
        return {}
    last = max(r["bucket"] for r in kl)
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for r in kl:
        if r["bucket"] == last:
            out[r["arm"]][r["prompt"]] = r["mean"]
    return out


def _last_bucket_range(ms: ModeState) -> list[int] | None:
    kl = [r for r in ms.bucket_rows if r["metric"] == "kl"]
    if not kl:
        return None
    last = max(kl, key=lambda r: r["bucket"])
    return [last["pos_lo"], last["pos_hi"]]


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


def run_study(
    model: DriftModel,
    prompts: list[Prompt],
    cfg: StudyConfig,
    out_dir: str | Path,
    *,
    command: list[str] | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    plots: bool = True,
    budgets: dict[str, float] | None = None,
    manifest_extra: dict | None = None,
    on_prompt: Callable[[str, int], None] | None = None,
) -> dict:
    """Measure every mode over the prompts, writing the run directory after every prompt; return
    the summary. `budgets` caps the seconds of each mode (at least one prompt always runs)."""
    from evalkit.drift.driver import free_running, manifest, now, progress_bar, record_error

    budgets = budgets or {}
    L = len(prompts[0].ids)
    if "prefill" in cfg.modes and L <= cfg.chunk_size:
        from evalkit.errors import InputError

        raise InputError(
            f"prefill mode needs prompts longer than one chunk ({L} tokens, chunk {cfg.chunk_size}): "
            "the first chunk never reads a rounded state back"
        )
    out = rundir.prepare(out_dir, overwrite)
    prompt_info = [
        {**p.info, "index": i, "length": len(p.ids), "sha256": tokens_sha256(torch.tensor(p.ids))}
        for i, p in enumerate(prompts)
    ]
    arms = cfg.all_arms()
    man = manifest(
        model,
        {
            **asdict(cfg),
            "floor_arm": AA_ARM if cfg.floor else None,
            "input": {"n_prompts": len(prompts), "length": L},
        },
        command,
    )
    man.update(manifest_extra or {})
    rundir.write_json(out / "manifest.json", man)
    rundir.write_json(out / "prompts.json", prompt_info)
    summary: dict[str, Any] = {
        "kind": "drift",
        "version": 2,
        "title": cfg.title,
        "config": {
            "model": model.describe(),
            "arms": cfg.arms,
            "floor_arm": AA_ARM if cfg.floor else None,
            "floor_how": AA_HOW if cfg.floor else None,
            "modes": cfg.modes,
            "chunk_size": cfg.chunk_size,
            "decode_block": cfg.decode_block,
            "n_prompts": len(prompts),
            "input": {"length": L, "source": prompts[0].info.get("source", "?"), "n_prompts": len(prompts)},
        },
        "study": {},
        "free_running": None,
        "errors": [],
    }
    states: dict[str, ModeState] = {}
    opener = session_opener(model)
    for mode in cfg.modes:
        ms = states[mode] = ModeState(mode, L, cfg.chunk_size if mode == "prefill" else None)
        ranges = fit_ranges(L, mode, ms.chunk_size, cfg.fit_starts)
        stop_at = time.perf_counter() + budgets[mode] if mode in budgets else None
        for i, p in enumerate(prompts):
            if stop_at is not None and ms.seconds and time.perf_counter() + ms.seconds[-1] > stop_at:
                ms.stopped_by_budget = True
                break
            bar = progress_bar(show_progress, L, f"drift {mode} prompt {i + 1}/{len(prompts)}")
            t0 = time.perf_counter()
            try:
                res = run_teacher_forced(
                    model,
                    torch.tensor(p.ids),
                    arms,
                    mode,
                    chunk_size=cfg.chunk_size,
                    decode_block=cfg.decode_block,
                    per_octave=cfg.per_octave,
                    max_bytes=cfg.max_bytes,
                    progress=(lambda n, _L, b=bar: b.update(n)) if bar else None,
                    open_session=opener,
                )
            except Exception as exc:  # noqa: BLE001 - keep the other mode (e.g. out of memory in one)
                from evalkit.errors import EvalkitError

                if isinstance(exc, EvalkitError):
                    raise
                record_error(summary, f"teacher-forced {mode}, prompt {i}", exc)
                break
            finally:
                if bar:
                    bar.close()
            ms.seconds.append(time.perf_counter() - t0)
            b, s, r = _per_prompt(res, i, ranges)
            ms.bucket_rows += b
            ms.state_rows += s
            ms.prompt_rows += r
            summary["study"][mode] = summarize_mode(ms, arms, cfg.floor, cfg.fit_starts)
            _write(out, summary, states)
            if on_prompt:
                on_prompt(mode, i)
        if ms.stopped_by_budget and ms.prompt_rows:
            summary["study"][mode] = summarize_mode(ms, arms, cfg.floor, cfg.fit_starts)
            _write(out, summary, states)
    if cfg.generate > 0:
        try:
            free_running(
                model,
                torch.tensor(prompts[0].ids),
                cfg.arms,
                generate=cfg.generate,
                prompt_length=cfg.prompt_length,
                chunk_size=cfg.chunk_size,
                out=out,
                summary=summary,
                show_progress=show_progress,
                budget=budgets.get("generate"),
            )
        except Exception as exc:  # noqa: BLE001
            from evalkit.errors import EvalkitError

            if isinstance(exc, EvalkitError):
                raise
            record_error(summary, "free running", exc)
    from evalkit.drift.verdict import verdicts

    summary["verdicts"] = verdicts(summary)
    _write(out, summary, states)
    man["finished_at"] = now()
    rundir.write_json(out / "manifest.json", man)
    if plots:
        from evalkit.drift.plots import plot_run

        try:
            plot_run(rundir.load_run(out), out)
        except Exception as exc:  # noqa: BLE001 - a plot must not lose the numbers
            record_error(summary, "plots", exc)
            _write(out, summary, states)
    from evalkit.drift.report import drift_markdown

    (out / "summary.md").write_text(drift_markdown(out))
    return summary


def _write(out: Path, summary: dict, states: dict[str, ModeState]) -> None:
    buckets, st, pb, ps, pr = [], [], [], [], []
    for ms in states.values():
        buckets += across_bucket_rows(ms)
        st += across_state_rows(ms)
        pb += ms.bucket_rows
        ps += ms.state_rows
        pr += ms.prompt_rows
    rundir.write_json(out / "summary.json", summary)
    rundir.write_json(out / "buckets.json", buckets)
    rundir.write_csv(out / "buckets.csv", buckets)
    rundir.write_json(out / "states.json", ps)
    rundir.write_csv(out / "states.csv", ps)
    rundir.write_csv(out / "state_errors.csv", st)
    rundir.write_csv(out / "prompt_buckets.csv", pb)
    rundir.write_csv(out / "prompt_results.csv", pr)
