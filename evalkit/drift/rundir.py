"""The drift run directory: the run store's (`evalkit.store.writer`), with drift's own readers' files.

manifest.json       what ran: evalkit version, git commit, command, model, arms, input, hardware
samples.jsonl       the measured rows, one line per finished (mode, prompt) (`evalkit.drift.rows`)
summary.json        per mode and arm: pooled metrics, state errors, growth fits; free running; costs
buckets.csv/.json   per mode × arm × metric × log-spaced position bucket: n, mean, sd, max, p50, p99
states.csv/.json    per mode × arm × checkpoint × KDA layer: relative error, max |value|, overflow
free_running.json   per arm: generated tokens, first divergence, agreement, health flags
kl.png top1.png nll.png state.png   metric against position, one line per arm, log axes
summary.md          Markdown for a pull request (`evalkit.drift.report.drift_markdown`)
A many-prompt study (`evalkit.drift.study`) adds prompts.json (each prompt's source, seed, sha256),
prompt_results.csv (per prompt × arm: scalars and growth slopes), prompt_buckets.csv (per prompt
bucket means and exact p50/p99/max) and state_errors.csv (across prompts per checkpoint); its
buckets.csv/json are then across prompts (mean, 95% t-CI, exact quantiles across prompts).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.store.jsonl import write_json_atomic


def _clean(x: Any, keep_nan: bool = False) -> Any:
    """JSON-safe: numpy scalars become Python numbers, NaN/inf None (JSON has no NaN) unless
    `keep_nan` (the stored rows keep them: JSON's extension, which Python reads back)."""
    if isinstance(x, dict):
        return {str(k): _clean(v, keep_nan) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v, keep_nan) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x) and not keep_nan:
        return None
    return x


def write_json(path: Path, obj: Any) -> None:
    """The run store's atomic JSON write, of the JSON-safe `obj`."""
    write_json_atomic(path, _clean(obj))


def write_csv(path: Path, rows: list[dict]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in _clean(r).items()})


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Everything a report or plot needs from a drift run directory."""
    d = Path(run_dir)
    if not (d / "summary.json").is_file():
        raise InputError(f"{d} is not a drift run directory (no summary.json)")
    out: dict[str, Any] = {"dir": d}
    for name in ("manifest", "summary", "buckets", "states", "free_running", "prompts"):
        p = d / f"{name}.json"
        out[name] = json.loads(p.read_text()) if p.is_file() else None
    return out


def is_drift_run(run_dir: str | Path) -> bool:
    """True for a directory written by `evalkit drift` (what `compare` checks before a drift section)."""
    p = Path(run_dir) / "summary.json"
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text()).get("kind") == "drift"
    except (OSError, ValueError):
        return False
