"""lm-eval's aggregated results file (`results_<datetime>.json`, lm-eval 0.4.x's EvaluationTracker
format) written beside a finished run's own files, so a run loads into lm-eval tooling
(`lm_eval.utils.make_table`, leaderboards, the zeno/wandb loggers).

Names follow lm-eval: each metric is `"<metric>,<filter>"` with its `"<metric>_stderr,<filter>"`;
evalkit's `exact_match,strict-match` already has that form, a metric without a filter gets lm-eval's
`none`. A task with context lengths also gets one entry per length named by the length, as lm-eval's
RULER tasks do (`"4096,none"`), or `"<metric>@<length>,<filter>"` when it scores several metrics.
Item-scored tasks report their mean item fraction (what lm-eval's RULER `string_match` means);
the others their accuracy. stderr is lm-eval's (summary.json's); "N/A" where undefined, as lm-eval."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from evalkit.store.jsonl import write_json_atomic

LMEVAL_MODEL = "evalkit"  # the name evalkit's lm-eval model registers under


def _name(metric: str) -> tuple[str, str]:
    name, _, flt = metric.partition(",")
    return name, flt or "none"


def _value(cell: dict[str, Any]) -> tuple[Any, Any]:
    """(value, stderr); an undefined stderr (n <= 1) is lm-eval's "N/A", which its tooling expects."""
    if cell.get("mean_score") is not None:
        value, se = cell["mean_score"], cell.get("score_stderr")
    else:
        value, se = cell["accuracy"], cell["stderr"]
    return value, "N/A" if se is None else se


def _task_results(task: str, metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"alias": task}
    several = len(metrics) > 1
    for metric, cells in metrics.items():
        name, flt = _name(metric)
        value, se = _value(cells["all"]) if "all" in cells else (None, "N/A")
        out[f"{name},{flt}"], out[f"{name}_stderr,{flt}"] = value, se
        for length, cell in cells.items():
            if length == "all":
                continue
            per = f"{name}@{length}" if several else length
            out[f"{per},{flt}"], out[f"{per}_stderr,{flt}"] = _value(cell)
    return out


def _model_args(manifest: dict[str, Any]) -> str:
    model, arm = manifest.get("model") or {}, manifest.get("arm") or {}
    args = {"pretrained": model.get("path"), "state_dtype": arm.get("state_dtype")}
    return ",".join(f"{k}={v}" for k, v in args.items() if v is not None)


def lmeval_results(manifest: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The aggregated results dict lm-eval's tracker would write for this run."""
    tasks = manifest.get("tasks") or {}
    results = {task: _task_results(task, metrics) for task, metrics in summary.items()}
    configs, versions, n_shot, n_samples, higher = {}, {}, {}, {}, {}
    for task, metrics in summary.items():
        config = (tasks.get(task) or {}).get("config") or {}
        configs[task] = {
            "task": task,
            **config,
            "metadata": {"config_hash": (tasks.get(task) or {}).get("hash")},
        }
        versions[task] = "evalkit"
        n_shot[task] = config.get("num_fewshot", 0)
        n = max((cells.get("all", {}).get("n", 0) for cells in metrics.values()), default=0)
        errors = max((cells.get("all", {}).get("errors", 0) for cells in metrics.values()), default=0)
        n_samples[task] = {"original": n + errors, "effective": n}
        higher[task] = {_name(m)[0]: True for m in metrics}
        results[task]["sample_len"] = n
    model = manifest.get("model") or {}
    return {
        "results": results,
        "group_subtasks": {task: [] for task in results},
        "configs": configs,
        "versions": versions,
        "n-shot": n_shot,
        "higher_is_better": higher,
        "n-samples": n_samples,
        "config": {
            "model": LMEVAL_MODEL,
            "model_args": _model_args(manifest),
            "model_num_parameters": None,
            "batch_size": None,
            "limit": None,
            "evalkit_arm": manifest.get("arm"),
            "evalkit_backend": manifest.get("backend"),
        },
        "git_hash": (manifest.get("git_commit") or "")[:7] or None,
        "date": manifest.get("finished_at"),
        "model_name": model.get("path"),
        "start_time": manifest.get("started_at"),
        "end_time": manifest.get("finished_at"),
        "lm_eval_version": (manifest.get("libraries") or {}).get("lm_eval"),
    }


def write_lmeval_results(run_dir: Path, manifest: dict[str, Any], summary: dict[str, Any]) -> Path:
    """Write `results_<datetime>.json` (lm-eval's name: ISO time with ':' as '-') and drop the
    earlier one a resumed run wrote, so a run directory holds one; returns the path written."""
    path = run_dir / f"results_{datetime.now().isoformat().replace(':', '-')}.json"
    write_json_atomic(path, lmeval_results(manifest, summary))
    for old in run_dir.glob("results_*.json"):
        if old != path and not old.is_symlink():
            old.unlink()
    return path
