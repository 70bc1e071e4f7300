"""RunWriter: the one way producers write a run directory, durable per sample and resumable.

Each `append` writes one complete line with a single write call, then flushes and fsyncs, so
a SIGKILL loses at most the sample being written (a torn last line, repaired on the next open).
Re-opening the same directory with the same identity resumes: `done_keys` says what to skip.
"""

from __future__ import annotations

import copy
import errno
import fcntl
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, MismatchError
from evalkit.redact import mask_manifest, mask_text
from evalkit.store.headroom import format_max_of, headroom_record
from evalkit.store.jsonl import (
    MALFORMED_JSON,
    fresh_temp_path,
    iter_jsonl,
    read_json,
    repair_torn_tail,
    write_json_atomic,
)
from evalkit.store.lmeval_results import write_lmeval_results
from evalkit.store.manifest import (
    ALLOW_SOURCE_CHANGE,
    check_manifest_types,
    first_identity_difference,
    identity_differences,
    is_code_field,
    now_utc,
)
from evalkit.store.samples_file import SAMPLES, SAMPLES_GZ
from evalkit.store.schema import SampleError, normalise_sample, sample_key
from evalkit.store.summary import summarise
from evalkit.user_files import regular_file

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
HEADROOM = "headroom.json"  # evalkit.store.headroom: state magnitudes per length
LOCK = ".lock"
ERRORS = "errors.jsonl"  # errored samples set aside when a resume retries them (the error history)
_MESSAGE_FIELDS = ("error", "gold_error")  # a sample's free-text messages (masked of URL credentials)


def open_no_follow(file: Path, flags: int, mode: int = 0o644) -> int:
    """`os.open` that refuses a symbolic link (a link planted in a run directory would make the
    writer truncate or append to the file it points to): InputError saying what to do."""
    if file.is_symlink():
        raise link_refused(file)
    try:
        return os.open(file, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since the check
            raise link_refused(file) from None
        raise


def link_refused(file: Path) -> InputError:
    return InputError(
        f"{file} is a symbolic link; evalkit does not follow links inside a run directory "
        "(remove it, or choose another output directory)"
    )


def refuse_linked_files(path: Path) -> None:
    """InputError if any file the writer reads, rewrites or appends to is a symbolic link, or is
    there but not a regular file (reading a FIFO would block the resume for ever)."""
    for name in (MANIFEST, SAMPLES, SUMMARY, ERRORS, LOCK):
        if (path / name).is_symlink():
            raise link_refused(path / name)
        if os.path.lexists(path / name):
            regular_file(path / name)


def lock_run_dir(path: Path) -> int:
    """Take the run directory's exclusive lock (flock: the kernel drops it when the process exits or
    is killed) and write our pid into it; a second writer gets an InputError naming the holder.
    Kept rather than `filelock`: filelock before 3.20.1 opened the lock with O_TRUNC through a link
    (its CVE), and 3.x after it still truncates on every attempt, a refused one too, erasing the
    holder's pid this error names; only 4.x (checked: 4.3.2, O_NOFOLLOW, pid via `on_acquired`)
    would do."""
    fd = open_no_follow(path / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise InputError(
                f"{path} is being written by another evalkit process (pid {holder}); wait for it or "
                "choose another output directory"
            ) from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def set_aside_errors(samples_path: Path, errors_path: Path) -> int:
    """Move the errored lines of samples.jsonl to errors.jsonl (appended first, then samples.jsonl
    is replaced atomically: a crash in between only duplicates history). Returns how many moved."""
    if not samples_path.exists():
        return 0
    kept: list[bytes] = []
    errored: list[bytes] = []
    for raw in samples_path.read_bytes().splitlines(keepends=True):
        try:
            obj = json.loads(raw)
        except MALFORMED_JSON:
            obj = None  # left in place: reading the run names the bad line
        is_error = isinstance(obj, dict) and obj.get("error") is not None
        (errored if is_error else kept).append(raw)
    if not errored:
        return 0
    with os.fdopen(open_no_follow(errors_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as fh:
        fh.writelines(errored)
        fh.flush()
        os.fsync(fh.fileno())
    tmp = fresh_temp_path(samples_path)
    with open(tmp, "xb") as fh:
        fh.writelines(kept)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, samples_path)
    return len(errored)


@dataclass(frozen=True)
class RowKind:
    """What a samples.jsonl line is: its check (`normalise`, raising SampleError naming the field)
    and the key a resume skips on. A run's lines are `Sample`s; a drift study's are its rows per
    (mode, prompt) (`evalkit.drift.rows`): one writer, lock, torn-line repair and resume for both."""

    normalise: Callable[[Any], dict[str, Any]]
    key: Callable[[dict[str, Any]], tuple]


SAMPLE_ROWS = RowKind(normalise_sample, sample_key)


class RunWriter:
    """Append-only writer of one run directory (use `RunWriter.open`)."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        done: set,
        fd: int,
        durable: bool = True,
        lock_fd: int = -1,
        rows: RowKind = SAMPLE_ROWS,
    ):
        self.path = path
        self.rows = rows
        self._lock_fd = lock_fd
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
        retry_errors: bool = True,
        allow_source_change: bool = False,
        rows: RowKind = SAMPLE_ROWS,
    ) -> RunWriter:
        """Create `out_dir` with `manifest`, or resume it if it holds a run with the same identity.

        Every append is flushed to the OS (a killed process loses nothing completed); with
        `durable` (default) it is also fsynced, so a machine crash loses nothing either.

        Raises MismatchError naming the first differing identity field (model, arm, task
        config hash, seeds, lengths), and InputError if the directory holds a run and
        `resume` is False. A change of the code that ran (`manifest.is_code_field`: the source
        hash, a library version) is refused too unless `allow_source_change`; then the resume
        records it.

        On resume with `retry_errors` (default), samples stored with an error are moved to
        errors.jsonl (kept as history) so that they are asked again.
        """
        path = Path(out_dir)
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} exists and is not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
            lock_fd = lock_run_dir(path)
        except OSError as exc:
            raise InputError(f"cannot write the run directory {path}: {exc.strerror or exc}") from None
        try:
            return cls._open_locked(
                path, manifest, resume, durable, lock_fd, retry_errors, allow_source_change, rows
            )
        except OSError as exc:  # read-only, disk full: a one-line error (a resume repairs the rest)
            os.close(lock_fd)
            raise InputError(f"cannot write the run directory {path}: {exc.strerror or exc}") from None
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _open_locked(
        cls,
        path: Path,
        manifest: dict[str, Any],
        resume: bool,
        durable: bool,
        lock_fd: int,
        retry_errors: bool = True,
        allow_source_change: bool = False,
        rows: RowKind = SAMPLE_ROWS,
    ) -> RunWriter:
        manifest = mask_manifest(manifest)  # no key or URL credential reaches the disk
        manifest_path = path / MANIFEST
        refuse_linked_files(path)
        if (path / SAMPLES_GZ).exists():
            raise InputError(
                f"{path} holds a compressed run ({SAMPLES_GZ}), which is read-only: compare and "
                f"report it as it is, or gunzip it to resume; or choose another output directory"
            )
        if manifest_path.exists():
            on_disk = read_json(manifest_path)
            check_manifest_types(on_disk, str(manifest_path))
            diff = first_identity_difference(on_disk, manifest, allow_source_change)
            if diff is not None:
                name, old, new = diff
                how = (
                    f"pass {ALLOW_SOURCE_CHANGE} to resume with this code anyway (recorded), or use "
                    "another output directory"
                    if is_code_field(name)
                    else "use another output directory"
                )
                raise MismatchError(
                    f"{path} holds a different run: {name} is {old} there but {new} now ({how})"
                )
            code_changes = {
                name: {"was": old, "now": new}
                for name, old, new in identity_differences(on_disk, manifest)
                if is_code_field(name)
            }
            if not resume:
                raise InputError(f"{path} already holds a run; resume it or choose another output directory")
            repair_torn_tail(path / SAMPLES)
            retried = set_aside_errors(path / SAMPLES, path / ERRORS) if retry_errors else 0
            done = cls._read_done(path / SAMPLES, on_disk.get("tasks"), rows)
            merged = copy.deepcopy(on_disk)
            merged["finished_at"] = None
            merged.setdefault("resumes", []).append(
                {
                    "at": now_utc(),
                    "command": manifest.get("command"),
                    "samples_on_disk": len(done),
                    "errors_retried": retried,
                    **({"source_change_allowed": code_changes} if code_changes else {}),
                }
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
        fd = open_no_follow(path / SAMPLES, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return cls(path, manifest, done, fd, durable, lock_fd, rows)

    @staticmethod
    def _read_done(
        samples_path: Path, tasks: dict[str, Any] | None = None, rows: RowKind = SAMPLE_ROWS
    ) -> set:
        """The keys on disk; a line of a task the manifest does not name (`tasks`, when it names
        any) is refused: it belongs to another run."""
        done: set = set()
        if not samples_path.exists():
            return done
        for number, obj in iter_jsonl(samples_path):
            try:
                key = rows.key(rows.normalise(obj))
            except SampleError as exc:
                raise InputError(f"{samples_path}:{number}: {exc}") from None
            if tasks and key[0] not in tasks:
                raise InputError(
                    f"{samples_path}:{number}: a sample of task {key[0]!r}, which the run's manifest does "
                    f"not have ({', '.join(sorted(tasks))}); it belongs to another run: move it out or "
                    "choose another output directory"
                )
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
            clean = self.rows.normalise(sample)
        except SampleError as exc:
            raise ValueError(f"invalid sample for {self.path / SAMPLES}: {exc}") from None
        for field in _MESSAGE_FIELDS:  # a server's error may quote its URL, credentials and all
            if isinstance(clean.get(field), str):
                clean[field] = mask_text(clean[field])
        key = self.rows.key(clean)
        line = (json.dumps(clean, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"RunWriter for {self.path} is closed")
            if key in self._done:
                raise ValueError(
                    f"sample {key} is already in {self.path / SAMPLES}; skip done_keys on resume"
                )
            view = memoryview(line)
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                if self.durable:
                    os.fsync(self._fd)
            except OSError as exc:  # disk full, quota: what is on disk stays; a re-run repairs, resumes
                raise InputError(
                    f"cannot write {self.path / SAMPLES}: {exc.strerror or exc}; free space and re-run "
                    "the same command to resume"
                ) from None
            self._done.add(key)

    def finish(
        self, extra_manifest: dict[str, Any] | None = None, metrics: dict[str, list[str]] | None = None
    ) -> dict[str, Any]:
        """Write summary.json from every sample on disk, stamp finished_at in manifest.json and
        write lm-eval's aggregated results_<datetime>.json beside them.
        `metrics` ({task: names}) keeps a task whose every sample errored in the summary."""
        with self._lock:
            samples = [normalise_sample(obj) for _, obj in iter_jsonl(self.path / SAMPLES)]
            summary = summarise(samples, metrics)
            write_json_atomic(self.path / SUMMARY, summary)
            if any("state_max_abs" in s for s in samples):
                record = headroom_record(samples, format_max_of(self.manifest))
                write_json_atomic(self.path / HEADROOM, record)
            self._stamp_finished(extra_manifest)
            write_lmeval_results(self.path, self.manifest, summary)
        self.close()
        return summary

    def mark_finished(self, extra_manifest: dict[str, Any] | None = None) -> None:
        """Stamp finished_at (and `extra_manifest`) in manifest.json, for a producer that writes
        its own summary (a drift study); `finish` does it for a run."""
        with self._lock:
            self._stamp_finished(extra_manifest)

    def _stamp_finished(self, extra_manifest: dict[str, Any] | None) -> None:
        self.manifest.update(mask_manifest(extra_manifest or {}))
        self.manifest["finished_at"] = now_utc()
        write_json_atomic(self.path / MANIFEST, self.manifest)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if self._fd >= 0:
                os.close(self._fd)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
        except Exception:  # noqa: BLE001
            pass
