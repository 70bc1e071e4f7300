"""Which file holds a run's samples: `samples.jsonl`, or `samples.jsonl.gz` for a finished run
compressed for keeping (committed results). A compressed run is read-only: readers open it
transparently, the writer refuses to resume it (appending needs the plain file)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

from evalkit.errors import InputError

SAMPLES = "samples.jsonl"
SAMPLES_GZ = "samples.jsonl.gz"


def samples_path(run_dir: Path) -> Path:
    """The run's samples file: the plain one, else the compressed one, else the plain name (absent).
    Both present is ambiguous, so refused."""
    plain, packed = run_dir / SAMPLES, run_dir / SAMPLES_GZ
    if packed.exists() and plain.exists():
        raise InputError(f"{run_dir}: both {SAMPLES} and {SAMPLES_GZ}; keep one of them")
    return packed if packed.exists() else plain


def has_samples(run_dir: Path) -> bool:
    return (run_dir / SAMPLES).exists() or (run_dir / SAMPLES_GZ).exists()


def compress_samples(run_dir: Path) -> Path:
    """Replace `samples.jsonl` by `samples.jsonl.gz`: deterministic bytes (no name, mtime 0), checked
    to decompress to the original before the original is removed."""
    plain, packed = run_dir / SAMPLES, run_dir / SAMPLES_GZ
    if packed.exists():
        raise InputError(f"{packed} exists already")
    tmp = packed.with_name(f".{SAMPLES_GZ}.tmp-{os.getpid()}")
    with open(plain, "rb") as fin, open(tmp, "xb") as raw:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as fout:
            shutil.copyfileobj(fin, fout)
    with gzip.open(tmp, "rb") as check:
        if check.read() != plain.read_bytes():
            tmp.unlink()
            raise InputError(f"{tmp}: does not decompress to {plain}; left {plain} as it was")
    os.replace(tmp, packed)
    plain.unlink()
    return packed
