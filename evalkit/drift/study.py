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

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from evalkit.backends.probe import DriftModel
from evalkit.drift import rows, rundir
from evalkit.drift.driver import free_running, manifest, progress_bar, record_error, tokens_sha256
from evalkit.drift.floor import AA_ARM, AA_HOW, session_opener
from evalkit.drift.prompts import Prompt
from evalkit.drift.study_summary import (
    FIT_STARTS,
    ModeState,
    across_bucket_rows,
    across_state_rows,
    fit_ranges,
    per_prompt_rows,
    prompt_rows_with_slopes,
    summarize_mode,
)
from evalkit.drift.teacher_forced import run_teacher_forced
from evalkit.drift.verdict import verdicts
from evalkit.errors import InputError, is_user_error
from evalkit.store.samples_file import SAMPLES
from evalkit.store.writer import ERRORS, MANIFEST, RunWriter, link_refused, lock_run_dir


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
    resume: bool = False,
    deadline: float | None = None,
    allow_source_change: bool = False,
) -> dict:
    """Measure every mode over the prompts, writing the run directory after every prompt; return
    the summary. `budgets` caps the seconds of each mode (at least one prompt always runs);
    `resume` continues the study in `out_dir` as the run store resumes a run (same identity, the
    code that ran included unless `allow_source_change`; the same prompts): the prompts a mode
    finished there are not run again; `deadline` (a `time.perf_counter()` value) stops every mode
    from taking a prompt that would end past it."""
    L = len(prompts[0].ids)
    if "prefill" in cfg.modes and L <= cfg.chunk_size:
        raise InputError(
            f"prefill mode needs prompts longer than one chunk ({L} tokens, chunk {cfg.chunk_size}): "
            "the first chunk never reads a rounded state back"
        )
    out = Path(out_dir)
    prompt_info = [
        {**p.info, "index": i, "length": len(p.ids), "sha256": tokens_sha256(torch.tensor(p.ids))}
        for i, p in enumerate(prompts)
    ]
    drift = {
        **asdict(cfg),
        "floor_arm": AA_ARM if cfg.floor else None,
        "input": {"n_prompts": len(prompts), "length": L},
    }
    man = {**manifest(model, drift, command), **(manifest_extra or {})}
    writer = _open_writer(out, man, overwrite and not resume, resume, allow_source_change)
    with writer:  # the run store's lock: two studies into one directory would interleave their files
        hashes = [p["sha256"] for p in prompt_info]
        saved = _saved_rows(out, hashes) if writer.done_keys else {}
        rundir.write_json(out / "prompts.json", prompt_info)
        study = _Study(model, prompts, hashes, cfg, out, _new_summary(model, prompts, cfg), writer)
        opener = session_opener(model)
        budgets = budgets or {}
        for mode in cfg.modes:
            stop_at = time.perf_counter() + budgets[mode] if mode in budgets else None
            _run_mode(study, mode, saved.get(mode), opener, (stop_at, deadline), show_progress, on_prompt)
        if cfg.generate > 0:
            _free_running(study, show_progress, budgets.get("generate"))
        study.summary["verdicts"] = verdicts(study.summary)
        study.write()
        writer.mark_finished({"drift": drift})  # the prompts taken, which a resume may have grown
        write_reports(out, study.summary, study.write, plots)
    return study.summary


def _open_writer(out: Path, man: dict, overwrite: bool, resume: bool, allow_source_change: bool) -> RunWriter:
    """The run store's writer of the study's rows: a new directory, or a resumed one checked as a
    run's resume is; a study from before the run store layout is refused (`--report-only` refits it).
    A planted link among the directory's files (it writes many: CSV, PNG, Markdown) is refused."""
    if resume and (out / rows.LEGACY).is_file():
        raise InputError(
            f"{out} holds a study from before the run store layout ({rows.LEGACY}): refit it with "
            "`evalkit drift --report-only`, or choose another --out"
        )
    if overwrite and out.is_dir():  # a fresh study replaces the rows and records of the one there
        os.close(lock_run_dir(out))  # not those of a study being written now: refused, one line
        for name in (MANIFEST, SAMPLES, ERRORS, rows.LEGACY):
            if (out / name).is_file() and not (out / name).is_symlink():
                (out / name).unlink()
    writer = RunWriter.open(out, man, resume, rows=rows.KIND, allow_source_change=allow_source_change)
    linked = sorted(p for p in out.iterdir() if p.is_symlink())
    if linked:
        writer.close()
        raise link_refused(linked[0])
    return writer


def _saved_rows(out: Path, ours: list[str]) -> dict[str, dict[str, list]]:
    """The rows of a resumed study, refused when a finished prompt is not the prompt it is now."""
    saved, hashes = rows.read(out)
    if any(i >= len(ours) or h != ours[i] for i, h in hashes.items()):
        raise InputError(f"{out}: the prompts differ from the run there; resume with the same prompts")
    return saved


@dataclass
class _Study:
    """One study being written: what every mode's prompt loop reads and updates."""

    model: DriftModel
    prompts: list[Prompt]
    hashes: list[str]  # each prompt's token sha256, recorded with its rows
    cfg: StudyConfig
    out: Path
    summary: dict[str, Any]
    writer: RunWriter
    states: dict[str, ModeState] = field(default_factory=dict)

    def write(self) -> None:
        write_study_files(self.out, self.summary, self.states, self.cfg.fit_starts)

    def summarize(self, mode: str) -> None:
        ms, cfg = self.states[mode], self.cfg
        self.summary["study"][mode] = summarize_mode(ms, cfg.all_arms(), cfg.floor, cfg.fit_starts).to_dict()
        self.write()


def _new_summary(model: DriftModel, prompts: list[Prompt], cfg: StudyConfig) -> dict[str, Any]:
    """summary.json before any prompt: the configuration, and no figures yet."""
    L, n = len(prompts[0].ids), len(prompts)
    return {
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
            "n_prompts": n,
            "input": {"length": L, "source": prompts[0].info.get("source", "?"), "n_prompts": n},
        },
        "study": {},
        "free_running": None,
        "errors": [],
    }


def _run_mode(
    study: _Study,
    mode: str,
    saved: dict | None,
    opener: Callable,
    stops: tuple[float | None, float | None],
    show_progress: bool,
    on_prompt: Callable[[str, int], None] | None,
) -> None:
    """One mode over the prompts (those a resumed study finished are skipped); the summary and
    the run directory are rewritten after every prompt. A mode takes no prompt that would end
    past its budget or the deadline (`stops`), estimated by the last prompt's duration."""
    cfg, prompts = study.cfg, study.prompts
    L = len(prompts[0].ids)
    ms = study.states[mode] = ModeState(mode, L, cfg.chunk_size if mode == "prefill" else None)
    done = rows.restore(ms, saved)
    for i, p in enumerate(prompts):
        if i in done:
            continue
        ends = time.perf_counter() + ms.seconds[-1] if ms.seconds else None
        if ends is not None and any(t is not None and ends > t for t in stops):
            ms.stopped_by_budget = True
            break
        bar = progress_bar(show_progress, L, f"drift {mode} prompt {i + 1}/{len(prompts)}")
        t0 = time.perf_counter()
        try:
            res = run_teacher_forced(
                study.model,
                torch.tensor(p.ids),
                cfg.all_arms(),
                mode,
                chunk_size=cfg.chunk_size,
                decode_block=cfg.decode_block,
                per_octave=cfg.per_octave,
                max_bytes=cfg.max_bytes,
                progress=(lambda n, _L, b=bar: b.update(n)) if bar else None,
                open_session=opener,
            )
        except Exception as exc:  # noqa: BLE001 - keep the other mode (e.g. out of memory in one)
            if is_user_error(exc):
                raise
            record_error(study.summary, f"teacher-forced {mode}, prompt {i}", exc)
            break
        finally:
            if bar:
                bar.close()
        ms.seconds.append(time.perf_counter() - t0)
        b, s, r = per_prompt_rows(res, i)
        study.writer.append(rows.line(mode, i, study.hashes[i], (b, s, r), ms.seconds[-1]))
        ms.bucket_rows += b
        ms.state_rows += s
        ms.prompt_rows += r
        study.summarize(mode)
        if on_prompt:
            on_prompt(mode, i)
    if ms.prompt_rows:  # the budget flag, or a resumed mode with nothing left to run
        study.summarize(mode)


def _free_running(study: _Study, show_progress: bool, budget: float | None) -> None:
    """Greedy generation from the first prompt by every arm; a failure is recorded, not raised."""
    cfg = study.cfg
    try:
        free_running(
            study.model,
            torch.tensor(study.prompts[0].ids),
            cfg.arms,
            generate=cfg.generate,
            prompt_length=cfg.prompt_length,
            chunk_size=cfg.chunk_size,
            out=study.out,
            summary=study.summary,
            show_progress=show_progress,
            budget=budget,
        )
    except Exception as exc:  # noqa: BLE001
        if is_user_error(exc):
            raise
        record_error(study.summary, "free running", exc)


def write_reports(out: Path, summary: dict, rewrite: Callable[[], None], plots: bool = True) -> None:
    """The plots and summary.md of a finished run directory; a plot that fails is recorded in the
    summary (`rewrite` writes it again), never raised: a plot must not lose the numbers."""
    from evalkit.drift.report import drift_markdown

    if plots:
        from evalkit.drift.plots import plot_run

        try:
            plot_run(rundir.load_run(out), out)
        except Exception as exc:  # noqa: BLE001
            record_error(summary, "plots", exc)
            rewrite()
    (out / "summary.md").write_text(drift_markdown(out))


def write_study_files(
    out: Path,
    summary: dict,
    states: dict[str, ModeState],
    fit_starts: tuple[int, ...] = FIT_STARTS,
) -> None:
    """Every file of the run directory a reader opens, from the modes' rows (samples.jsonl has
    them already: appended after each prompt)."""
    buckets, st, pb, ps, pr = [], [], [], [], []
    for ms in states.values():
        buckets += across_bucket_rows(ms)
        st += across_state_rows(ms)
        pb += ms.bucket_rows
        ps += ms.state_rows
        pr += prompt_rows_with_slopes(ms, fit_ranges(ms.length, ms.mode, ms.chunk_size, fit_starts))
    rundir.write_json(out / "summary.json", summary)
    rundir.write_json(out / "buckets.json", buckets)
    rundir.write_csv(out / "buckets.csv", buckets)
    rundir.write_json(out / "states.json", ps)
    rundir.write_csv(out / "states.csv", ps)
    rundir.write_csv(out / "state_errors.csv", st)
    rundir.write_csv(out / "prompt_buckets.csv", pb)
    rundir.write_csv(out / "prompt_results.csv", pr)
