"""Read lm-eval `--log_samples` files (`samples_<task>_<datetime>.jsonl`) as store samples.

lm-eval writes one line per (document, filter). Lines of one document are merged into one
sample: `correct[name]` per filter (the filter name when the task has one metric, the metric
name when the filter is "none", else "metric,filter"), `extracted[name]` = the filtered answer,
`response` = the raw first response. `prompt_hash` is lm-eval's own (sha256 of the prompt text),
which equals `evalkit.store.prompt_hash` of the same text. RULER-style tasks, whose metric keys
are context lengths with -1 for the other lengths, become samples with `length` set.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.store.hashing import config_hash
from evalkit.store.jsonl import iter_jsonl, read_json

FILE_RE = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9\-.]+)\.jsonl$")
_NEEDED = ("doc_id", "filter", "metrics", "prompt_hash", "target", "resps")


def is_lmeval_samples_file(path: Path) -> bool:
    return FILE_RE.match(path.name) is not None


def task_of(path: Path) -> str:
    m = FILE_RE.match(path.name)
    if m is None:
        raise InputError(f"{path}: not an lm-eval samples file (expected samples_<task>_<datetime>.jsonl)")
    return m.group("task")


def _metric_name(metric: str, filt: str, n_metrics: int) -> str:
    if filt == "none":
        return metric
    return filt if n_metrics == 1 else f"{metric},{filt}"


def _first_response(resps: Any) -> str:
    cur = resps
    while isinstance(cur, list) and cur:
        cur = cur[0]
    return cur if isinstance(cur, str) else ("" if cur is None or cur == [] else str(cur))


def _first_filtered(filtered: Any) -> str | None:
    cur = filtered
    while isinstance(cur, list) and cur:
        cur = cur[0]
    return None if cur is None or cur == [] else str(cur)


def _merge_line(sample: dict[str, Any], line: dict[str, Any], where: str) -> None:
    filt = str(line["filter"])
    metrics = [str(m) for m in line["metrics"]]
    lengths = [m for m in metrics if m.isascii() and m.isdigit()]
    if lengths and len(lengths) == len(metrics):  # RULER: one metric per context length
        own = [m for m in metrics if isinstance(line.get(m), (int, float)) and line[m] != -1]
        if len(own) != 1:
            raise InputError(f"{where}: expected exactly one length with a score, got {own}")
        sample["length"] = int(own[0])
        named = {("score" if filt == "none" else filt): line[own[0]]}
    else:
        named = {_metric_name(m, filt, len(metrics)): line.get(m) for m in metrics}
    for name, value in named.items():
        if isinstance(value, bool) or value in (0, 1, 0.0, 1.0):
            sample["correct"][name] = bool(value)
        elif isinstance(value, (int, float)) and 0.0 <= value <= 1.0:
            sample["score"][name] = float(value)
            sample["correct"][name] = value == 1.0
        # corpus-level metrics (tuples for bleu/f1) have no per-question right/wrong: skipped
    extracted = _first_filtered(line.get("filtered_resps"))
    if extracted is not None:
        sample["extracted"][filt] = extracted


def read_samples_file(path: Path) -> list[dict[str, Any]]:
    """All samples of one lm-eval samples file, one per document (and length)."""
    task = task_of(path)
    by_doc: dict[Any, dict[str, Any]] = {}
    seen: set[tuple[Any, str]] = set()
    for number, line in iter_jsonl(path):
        where = f"{path}:{number}"
        for name in _NEEDED:
            if name not in line:
                raise InputError(f"{where}: missing field {name!r} (not an lm-eval --log_samples line?)")
        doc_id = line["doc_id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)) or doc_id == "":
            raise InputError(f"{where}: doc_id must be an int or a non-empty string, got {doc_id!r:.80}")
        if not isinstance(line["metrics"], list) or not isinstance(line["filter"], str):
            raise InputError(f"{where}: 'metrics' must be a list and 'filter' a string")
        if (doc_id, str(line["filter"])) in seen:
            raise InputError(f"{where}: doc {doc_id} appears twice for filter {line['filter']!r}")
        seen.add((doc_id, str(line["filter"])))
        sample = by_doc.get(doc_id)
        if sample is None:
            sample = by_doc[doc_id] = {
                "task": task,
                "doc_id": doc_id,
                "length": None,
                "prompt_hash": str(line["prompt_hash"]),
                "target": str(line["target"]),
                "response": _first_response(line["resps"]),
                "correct": {},
                "score": {},
                "extracted": {},
                "error": None,
                "source_line": number,
            }
        elif sample["prompt_hash"] != line["prompt_hash"]:
            raise InputError(
                f"{where}: doc {doc_id} has a different prompt_hash than on line {sample['source_line']}"
            )
        _merge_line(sample, line, where)
    out = []
    for sample in by_doc.values():
        if not sample["correct"]:
            raise InputError(
                f"{path}:{sample['source_line']}: doc {sample['doc_id']} has no per-question "
                f"0/1 metric evalkit can pair on"
            )
        if not sample["score"]:
            del sample["score"]
        out.append(sample)
    return out


def manifest_for(files: list[Path]) -> dict[str, Any]:
    """A manifest for lm-eval files: the files, plus model and task configs from results_*.json if present."""
    manifest: dict[str, Any] = {"source": "lm-eval", "files": [str(f) for f in files], "tasks": {}}
    for f in files:
        m = FILE_RE.match(f.name)
        task = task_of(f)
        manifest["tasks"][task] = {"hash": None}
        results = f.with_name(f"results_{m.group('date')}.json") if m else None
        if results is not None and results.exists():
            try:
                data = read_json(results)
            except InputError:
                continue
            cfg = (data.get("configs") or {}).get(task)
            if cfg is not None:
                # Recorded for reading, not compared: lm-eval puts model arguments in task metadata.
                manifest["tasks"][task]["config_sha256"] = config_hash(cfg)
            model_args = (data.get("config") or {}).get("model_args")
            manifest.setdefault("model", {"path": model_args})
            manifest.setdefault("lm_eval_version", data.get("lm_eval_version"))
    return manifest
