"""load_run: read a run directory, one lm-eval samples file, or a directory of them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.store.jsonl import iter_jsonl, read_json
from evalkit.store.lmeval import is_lmeval_samples_file, manifest_for, read_samples_file, task_of
from evalkit.store.samples_file import SAMPLES, SAMPLES_GZ, has_samples, samples_path
from evalkit.store.schema import SampleError, normalise_sample, sample_key
from evalkit.store.writer import MANIFEST


@dataclass
class RunData:
    manifest: dict[str, Any]
    samples: list[dict[str, Any]]
    path: str = ""
    kind: str = "evalkit"  # "evalkit" | "lm-eval"
    origins: dict[tuple, str] = field(default_factory=dict, repr=False)  # key -> "file:line"

    @property
    def tasks(self) -> list[str]:
        return sorted({s["task"] for s in self.samples})

    @property
    def finished(self) -> bool:
        """lm-eval logs are written at the end of a run; an evalkit run is finished once
        `finished_at` is stamped (a killed or still-running run has null there)."""
        return self.kind != "evalkit" or bool(self.manifest.get("finished_at"))

    @property
    def backend(self) -> str | None:
        """`local` (the in-process engine), `openai` (a server), or None when not recorded."""
        backend = self.manifest.get("backend")
        return str(backend.get("name")) if isinstance(backend, dict) and backend.get("name") else None

    @property
    def label(self) -> str:
        """A short human name for the arm: arm.label, else arm.state_dtype, else the path."""
        arm = self.manifest.get("arm") or {}
        if isinstance(arm, dict):
            for key in ("label", "state_dtype"):
                if arm.get(key):
                    return str(arm[key])
        return Path(self.path).name or self.path


def _index(samples: Iterable[tuple[str, dict[str, Any]]], origin_of_path: str) -> tuple[list, dict]:
    out, origins = [], {}
    for where, s in samples:
        key = sample_key(s)
        if key in origins:
            raise InputError(
                f"{where}: duplicate sample {key[0]}/{key[1]}"
                f"{'' if key[2] is None else f' at length {key[2]}'} (first at {origins[key]})"
            )
        origins[key] = where
        out.append(s)
    if not out:
        raise InputError(f"{origin_of_path}: empty run (no samples)")
    return out, origins


# Manifest fields a reader relies on, and the JSON types they must have when present.
_MANIFEST_TYPES = {
    "tasks": (dict,),
    "arm": (dict,),
    "backend": (dict,),
    "model": (dict,),
    "finished_at": (str, type(None)),
    "started_at": (str, type(None)),
}
_TYPE_NAMES = {dict: "an object", str: "a string", type(None): "null"}


def check_manifest(manifest: dict[str, Any], where: str) -> dict[str, Any]:
    """InputError naming the first field of the wrong JSON type (the rest of the reader trusts them)."""
    for name, types in _MANIFEST_TYPES.items():
        if name in manifest and not isinstance(manifest[name], types):
            wanted = " or ".join(_TYPE_NAMES[t] for t in types)
            raise InputError(f"{where}: field {name!r} must be {wanted}, got {type(manifest[name]).__name__}")
    for task, spec in (manifest.get("tasks") or {}).items():
        if not isinstance(spec, dict):
            raise InputError(f"{where}: tasks[{task!r}] must be an object, got {type(spec).__name__}")
        if spec.get("hash") is not None and not isinstance(spec["hash"], str):
            got = type(spec["hash"]).__name__
            raise InputError(f"{where}: tasks[{task!r}].hash must be a string, got {got}")
    return manifest


def _load_run_dir(path: Path, keep_prompts: bool = True) -> RunData:
    samples_file = samples_path(path)
    if not samples_file.exists():
        raise InputError(f"{path}: no {SAMPLES} (not an evalkit run directory)")
    manifest = (
        check_manifest(read_json(path / MANIFEST), str(path / MANIFEST)) if (path / MANIFEST).exists() else {}
    )

    def rows():
        for number, obj in iter_jsonl(samples_file):
            if not keep_prompts:
                obj.pop("prompt", None)  # up to 0.5 MB each; prompt_hash pairs the questions
            try:
                yield f"{samples_file}:{number}", normalise_sample(obj)
            except SampleError as exc:
                raise InputError(f"{samples_file}:{number}: {exc}") from None

    samples, origins = _index(rows(), str(samples_file))
    return RunData(manifest, samples, str(path), "evalkit", origins)


def _load_lmeval(files: list[Path], shown: str) -> RunData:
    seen: dict[str, Path] = {}
    for f in files:
        task = task_of(f)
        if task in seen:
            raise InputError(
                f"{shown}: two lm-eval sample files for task {task!r} "
                f"({seen[task].name}, {f.name}); pass one file"
            )
        seen[task] = f

    def rows():
        for f in files:
            for s in read_samples_file(f):
                where = f"{f}:{s.pop('source_line')}"
                try:
                    yield where, normalise_sample(s)
                except SampleError as exc:
                    raise InputError(f"{where}: {exc}") from None

    samples, origins = _index(rows(), shown)
    return RunData(manifest_for(files), samples, shown, "lm-eval", origins)


def load_run(path: str | os.PathLike, keep_prompts: bool = True) -> RunData:
    """A run as RunData(manifest, samples), from an evalkit run directory, an lm-eval
    `samples_<task>_*.jsonl` file, or a directory holding such files (searched two levels deep,
    as lm-eval nests them under the model name). Raises InputError with file and line on bad input.
    `keep_prompts=False` leaves each evalkit sample's prompt text out (a reader that pairs on
    prompt_hash, as compare does, then holds a fraction of a long-context run in memory).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if p.is_file():
        if p.name in (SAMPLES, SAMPLES_GZ):
            return _load_run_dir(p.parent, keep_prompts)
        if is_lmeval_samples_file(p):
            return _load_lmeval([p], str(p))
        raise InputError(
            f"{p}: neither an evalkit run directory nor an lm-eval samples_<task>_<date>.jsonl file"
        )
    if has_samples(p) or (p / MANIFEST).exists():
        return _load_run_dir(p, keep_prompts)
    files = sorted(
        f
        for pattern in ("samples_*.jsonl", "*/samples_*.jsonl")
        for f in p.glob(pattern)
        if is_lmeval_samples_file(f)
    )
    if not files:
        raise InputError(f"{p}: empty run (no {SAMPLES} and no lm-eval samples_<task>_*.jsonl files)")
    return _load_lmeval(files, str(p))


def load_finished_run(
    path: str | os.PathLike, side: str = "", allow_partial: bool = False, keep_prompts: bool = True
) -> RunData:
    """`load_run`, refusing a run whose manifest has no `finished_at` (still running, or killed)
    unless `allow_partial`; `side` names it in the message ("baseline", "candidate", ...)."""
    run = load_run(path, keep_prompts)
    if not run.finished and not allow_partial:
        which = f"the {side} run {path}" if side else f"the run {path}"
        raise InputError(
            f"{which} has not finished (no finished_at in its manifest): it may be running or was "
            f"interrupted; resume it, or pass --allow-partial to compare what is on disk"
        )
    return run
