"""RunWriter: the one way producers write a run directory, durable per sample and resumable.

Each `append` writes one complete line with a single write call, then flushes and fsyncs, so
a SIGKILL loses at most the sample being written (a torn last line, repaired on the next open).
Re-opening the same directory with the same identity resumes: `done_keys` says what to skip.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, MismatchError
from evalkit.store.jsonl import iter_jsonl, read_json, repair_torn_tail, write_json_atomic
from evalkit.store.manifest import first_identity_difference, now_utc
from evalkit.store.schema import SampleError, normalise_sample, sample_key
from evalkit.store.summary import summarise

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"


class RunWriter:
    """Append-only writer of one run directory (use `RunWriter.open`)."""

    def __init__(self, path: Path, manifest: dict[str, Any], done: set, fd: int, durable: bool = True):
        self.path = path
        self.durable = durable
        self.manifest = manifest
        self._done = done
        self._fd = fd
        self._lock = threading.Lock()

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        out_dir: str | os.PathLike,
        manifest: dict[str, Any],
        resume: bool = True,
        *,
        durable: bool = True,
    ) -> RunWriter:
        """Create `out_dir` with `manifest`, or resume it if it holds a run with the same identity.

        Every append is flushed to the OS (a killed process loses nothing completed); with
        `durable` (default) it is also fsynced, so a machine crash loses nothing either.

        Raises MismatchError naming the first differing identity field (model, arm, task
        config hash, seeds, lengths), and InputError if the directory holds a run and
        `resume` is False.
        """
        path = Path(out_dir)
        manifest_path = path / MANIFEST
        if manifest_path.exists():
            on_disk = read_json(manifest_path)
            diff = first_identity_difference(on_disk, manifest)
            if diff is not None:
                name, old, new = diff
                raise MismatchError(
                    f"{path} holds a different run: {name} is {old} there but {new} now "
                    f"(use another output directory)"
                )
            if not resume:
                raise InputError(f"{path} already holds a run; resume it or choose another output directory")
            repair_torn_tail(path / SAMPLES)
            done = cls._read_done(path / SAMPLES)
            merged = copy.deepcopy(on_disk)
            merged["finished_at"] = None
            merged.setdefault("resumes", []).append(
                {"at": now_utc(), "command": manifest.get("command"), "samples_on_disk": len(done)}
            )
            write_json_atomic(manifest_path, merged)
            manifest = merged
        else:
            if path.exists() and not path.is_dir():
                raise InputError(f"{path} exists and is not a directory")
            if (path / SAMPLES).exists():
                raise InputError(f"{path} has {SAMPLES} but no {MANIFEST}; refusing to mix runs")
            path.mkdir(parents=True, exist_ok=True)
            manifest = copy.deepcopy(manifest)
            manifest.setdefault("finished_at", None)
            write_json_atomic(manifest_path, manifest)
            done = set()
        fd = os.open(path / SAMPLES, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return cls(path, manifest, done, fd, durable)

    @staticmethod
    def _read_done(samples_path: Path) -> set:
        done: set = set()
        if not samples_path.exists():
            return done
        for number, obj in iter_jsonl(samples_path):
            try:
                key = sample_key(normalise_sample(obj))
            except SampleError as exc:
                raise InputError(f"{samples_path}:{number}: {exc}") from None
            if key in done:
                raise InputError(f"{samples_path}:{number}: duplicate sample {key}")
            done.add(key)
        return done

    # -- writing -------------------------------------------------------------------------------
    @property
    def done_keys(self) -> set[tuple[str, str, int | None]]:
        """(task, str(doc_id), length) of every sample already on disk."""
        with self._lock:
            return set(self._done)

    def append(self, sample: dict[str, Any]) -> None:
        """Validate and durably append one sample (thread-safe); a key already on disk is a ValueError."""
        try:
            clean = normalise_sample(sample)
        except SampleError as exc:
            raise ValueError(f"invalid sample for {self.path / SAMPLES}: {exc}") from None
        key = sample_key(clean)
        line = (json.dumps(clean, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"RunWriter for {self.path} is closed")
            if key in self._done:
                raise ValueError(
                    f"sample {key} is already in {self.path / SAMPLES}; skip done_keys on resume"
                )
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.durable:
                os.fsync(self._fd)
            self._done.add(key)

    def finish(self, extra_manifest: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write summary.json from every sample on disk and stamp finished_at in manifest.json."""
        with self._lock:
            samples = [normalise_sample(obj) for _, obj in iter_jsonl(self.path / SAMPLES)]
            summary = summarise(samples)
            write_json_atomic(self.path / SUMMARY, summary)
            self.manifest.update(copy.deepcopy(extra_manifest or {}))
            self.manifest["finished_at"] = now_utc()
            write_json_atomic(self.path / MANIFEST, self.manifest)
        self.close()
        return summary

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if self._fd >= 0:
                os.close(self._fd)
        except Exception:  # noqa: BLE001
            pass
