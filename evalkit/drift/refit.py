"""Refit a saved drift study from its rows: `evalkit drift --report-only RUN_DIR`.

Every figure of a study's summary is computed from the rows each prompt measured, which
samples.jsonl keeps exactly (`evalkit.drift.rows`); so when the analysis improves (how a prompt's
buckets are merged into fit points, say) a study that took an hour of GPU time is refitted in
seconds, on any machine, without the model. The summary, verdicts, CSVs, plots and summary.md
are rewritten as a run would write them today; the measured rows are not touched.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

from evalkit.drift import rows
from evalkit.drift.study import StudyConfig, write_reports, write_study_files
from evalkit.drift.study_summary import ModeState, summarize_mode
from evalkit.drift.verdict import verdicts
from evalkit.errors import InputError
from evalkit.store.jsonl import read_json, repair_torn_tail
from evalkit.store.samples_file import SAMPLES
from evalkit.store.writer import MANIFEST, lock_run_dir
from evalkit.user_files import regular_file


def refit_study(run_dir: str | Path, *, plots: bool = True) -> dict:
    """Rewrite the run directory's summary from its rows; return the new summary."""
    out = Path(run_dir)
    if not out.is_dir():
        raise InputError(f"{out} is not a drift run directory")
    fd = lock_run_dir(out)  # a writer, as a resume is: one at a time
    try:
        # a line torn by a kill (a snapshot taken mid-append) is dropped, as a resume drops it
        repair_torn_tail(out / SAMPLES)
        summary, states, cfg = refitted(out)

        def rewrite() -> None:
            write_study_files(out, summary, states, cfg.fit_starts)

        rewrite()
        write_reports(out, summary, rewrite, plots)
    finally:
        os.close(fd)
    return summary


def refitted(out: Path) -> tuple[dict, dict[str, ModeState], StudyConfig]:
    """The summary the study in `out` has when summarised today from its rows (nothing is
    written), with the modes' rows and the study's configuration (its manifest's)."""
    saved, _ = rows.read(out)
    try:
        summary = json.loads(regular_file(out / "summary.json").read_text())
        n_prompts = len(json.loads(regular_file(out / "prompts.json").read_text()))
    except (OSError, ValueError) as exc:
        raise InputError(f"{out}: cannot read its summary or prompts ({exc}); a refit needs them") from None
    conf = read_json(out / MANIFEST).get("drift") or {}
    names = {f.name for f in fields(StudyConfig)}
    cfg = StudyConfig(**{k: v for k, v in conf.items() if k in names})
    cfg.fit_starts = tuple(cfg.fit_starts)
    length = int(conf["input"]["length"])
    states: dict[str, ModeState] = {}
    summary["study"] = {}
    for mode in cfg.modes:
        ms = ModeState(mode, length, cfg.chunk_size if mode == "prefill" else None)
        rows.restore(ms, saved.get(mode))
        states[mode] = ms
        if not ms.prompt_rows:
            continue
        ms.stopped_by_budget = len({r["prompt"] for r in ms.prompt_rows}) < n_prompts
        summary["study"][mode] = summarize_mode(ms, cfg.all_arms(), cfg.floor, cfg.fit_starts).to_dict()
    summary["verdicts"] = verdicts(summary)
    return summary, states, cfg
