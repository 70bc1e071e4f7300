"""Refit a saved drift study from its checkpoint: `evalkit drift --report-only RUN_DIR`.

Every figure of a study's summary is computed from the rows each prompt measured, which
the checkpoint keeps exactly; so when the analysis improves (how a prompt's buckets are merged
into fit points, say) a study that took an hour of GPU time is refitted in seconds, on any
machine, without the model. The summary, verdicts, CSVs, plots and summary.md are rewritten as a
run would write them today; the measured rows are not touched.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from evalkit.drift import checkpoint
from evalkit.drift.study import StudyConfig, write_reports, write_study_files
from evalkit.drift.study_summary import ModeState, summarize_mode
from evalkit.drift.verdict import verdicts
from evalkit.errors import InputError
from evalkit.store.jsonl import repair_torn_tail


def refit_study(run_dir: str | Path, *, plots: bool = True) -> dict:
    """Rewrite the run directory's summary from its checkpoint; return the new summary."""
    out = Path(run_dir)
    # a writer, as a resume is: a line torn by a kill (a snapshot taken mid-append) is dropped
    repair_torn_tail(out / checkpoint.NAME)
    summary, states, cfg = refitted(out)

    def rewrite() -> None:
        write_study_files(out, summary, states, cfg.fit_starts)

    rewrite()
    write_reports(out, summary, rewrite, plots)
    return summary


def refitted(out: Path) -> tuple[dict, dict[str, ModeState], StudyConfig]:
    """The summary the study in `out` has when summarised today from its checkpoint (nothing is
    written), with the modes' rows and the study's configuration."""
    saved = checkpoint.read(out)
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{out}: cannot read summary.json ({exc}); a refit needs the run's files") from None
    conf = saved["config"]
    names = {f.name for f in fields(StudyConfig)}
    cfg = StudyConfig(**{k: v for k, v in conf.items() if k in names})
    cfg.fit_starts = tuple(cfg.fit_starts)
    arms = cfg.all_arms()
    states: dict[str, ModeState] = {}
    summary["study"] = {}
    for mode in cfg.modes:
        ms = ModeState(mode, int(conf["length"]), cfg.chunk_size if mode == "prefill" else None)
        checkpoint.restore(ms, saved["modes"].get(mode))
        states[mode] = ms
        if not ms.prompt_rows:
            continue
        ms.stopped_by_budget = len({r["prompt"] for r in ms.prompt_rows}) < len(saved["prompt_sha256"])
        summary["study"][mode] = summarize_mode(ms, arms, cfg.floor, cfg.fit_starts).to_dict()
    summary["verdicts"] = verdicts(summary)
    return summary, states, cfg
