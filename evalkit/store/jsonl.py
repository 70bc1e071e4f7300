"""Reading JSON-lines files strictly (errors name file and line) and repairing a torn last line.

A run killed mid-write can leave its last line without a newline. The writer repairs that
(drops the partial line, with a one-line notice) before appending; readers refuse it, so a report is
never computed from a damaged file without the user knowing.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.user_files import regular_file

# what json.loads raises on bad input: bad syntax, bad UTF-8 (both ValueErrors, as is an integer
# past Python's 4,300-digit limit), and nesting deeper than the parser's recursion (a line of
# 100,000 "[" is valid JSON that Python cannot read)
MALFORMED_JSON = (ValueError, RecursionError)


def json_error_message(exc: BaseException) -> str:
    """One line for one of MALFORMED_JSON."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(getattr(exc, "msg", exc)).splitlines()[0]


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for every non-blank line; InputError on any bad line. Read one
    line at a time: a reader holds one line's bytes, never the whole file's (runs reach GBs).
    A `.gz` file is decompressed as it is read (a compressed run's `samples.jsonl.gz`)."""
    try:
        src = regular_file(path)
        fh = gzip.open(src, "rb") if path.suffix == ".gz" else open(src, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        number = 0
        while True:
            try:
                raw = fh.readline()
            except OSError as exc:  # gzip's BadGzipFile is one
                raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
            except EOFError:  # a compressed stream cut short
                raise InputError(f"{path}: cannot read (compressed data ends early)") from None
            if not raw:
                return
            number += 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except MALFORMED_JSON as exc:
                torn = not raw.endswith(b"\n")  # only the last line can lack its newline
                what = "truncated last line" if torn else "malformed JSON line"
                hint = (
                    " (the run was killed mid-write? re-run it to resume, which repairs the file)"
                    if torn
                    else ""
                )
                raise InputError(f"{path}:{number}: {what}: {json_error_message(exc)}{hint}") from None
            del raw
            if not isinstance(obj, dict):
                raise InputError(
                    f"{path}:{number}: expected a JSON object per line, got {type(obj).__name__}"
                )
            yield number, obj


def repair_torn_tail(path: Path) -> int:
    """Make the file end on a complete line; return how many bytes were dropped (0 if none).

    A last line without a trailing newline is kept (newline added) if it parses as a JSON
    object, and dropped otherwise.
    """
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    try:
        whole = isinstance(json.loads(tail), dict)
    except MALFORMED_JSON:
        whole = False
    with open(path, "r+b") as fh:
        if whole:
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
        else:
            fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    if whole:
        return 0
    print(  # a plain notice for the user, not a Python warning naming evalkit's source file
        f"evalkit: notice: {path}: dropped a truncated last line ({len(tail)} bytes) left by an "
        "interrupted write; that sample will be redone",
        file=sys.stderr,
        flush=True,
    )
    return len(tail)


def fresh_temp_path(path: Path) -> Path:
    """The temporary name `path` is written under before its rename, removed first if present:
    created exclusively (mode "x"), it is never a link planted to redirect the write."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    return tmp


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file, fsync it, then rename it over `path` (never half-written)."""
    tmp = fresh_temp_path(path)
    with open(tmp, "x", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def read_json(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(regular_file(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except MALFORMED_JSON as exc:
        raise InputError(f"{path}: malformed JSON ({json_error_message(exc)})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: expected a JSON object")
    return obj
