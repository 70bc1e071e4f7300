"""Where GSM8K comes from: a local folder (`--data-dir`, or `$EVALKIT_DATA`) holding
`train.jsonl` and `test.jsonl`, else the Hugging Face hub (`openai/gsm8k`, config `main`), else
the pinned copy shipped in `evalkit/assets/gsm8k/` (the same rows; MIT), so an offline clone works.

Local copies are checked first and the hub is only tried when it is reachable (offline
variables unset, and a 3-second connection test passes), so an offline machine fails at once
with a message that says where evalkit looked and how to point it at a copy, instead of
waiting half a minute for `datasets` to time out.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import evalkit
from evalkit.errors import InputError

HUB_DATASET = "openai/gsm8k"
HUB_CONFIG = "main"
ENV_VAR = "EVALKIT_DATA"
SPLITS = ("train", "test")
# evalkit/assets/gsm8k: found through the evalkit package, since tasks/ installs as evalkit.tasks
# but lives beside evalkit/ in a checkout.
BUNDLED_DIR = Path(evalkit.__file__).resolve().parent / "assets" / "gsm8k"


class DataNotFoundError(InputError):
    """GSM8K is neither in a local folder nor reachable on the hub."""


@dataclass(frozen=True)
class GSM8KSource:
    kind: str  # "local" | "hub"
    files: dict[str, Path] = field(default_factory=dict)  # split -> jsonl (local only)

    def describe(self) -> dict[str, Any]:
        if self.kind == "hub":
            return {"kind": "hub", "dataset": HUB_DATASET, "config": HUB_CONFIG}
        return {"kind": "local", "files": {k: str(v) for k, v in self.files.items()}}


_RECORDERS: list[list[GSM8KSource]] = []


@contextmanager
def recording_sources() -> Iterator[list[GSM8KSource]]:
    """Collects every GSM8K source located inside the block (what a task's requests() read)."""
    seen: list[GSM8KSource] = []
    _RECORDERS.append(seen)
    try:
        yield seen
    finally:
        _RECORDERS.remove(seen)


def _noted(src: GSM8KSource) -> GSM8KSource:
    for seen in _RECORDERS:
        if src not in seen:
            seen.append(src)
    return src


@lru_cache(maxsize=16)
def _content_hash(files: tuple[tuple[str, str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for split, path, _size, _mtime in files:
        h.update(split.encode() + b"\0")
        h.update(Path(path).read_bytes())
    return h.hexdigest()


def source_identity(sources: list[GSM8KSource]) -> dict[str, Any] | None:
    """What a run records about the data it read: the files and a content hash of them (resume
    refuses another dataset under the same doc ids), or the hub dataset; None if none was read."""
    if not sources:
        return None
    out: dict[str, Any] = {"sources": [], "sha256": None}
    h = hashlib.sha256()
    for src in sources:
        desc = src.describe()
        if src.kind == "local":
            key = tuple(
                (s, str(p), p.stat().st_size, p.stat().st_mtime_ns) for s, p in sorted(src.files.items())
            )
            desc["sha256"] = _content_hash(key)
        out["sources"].append(desc)
        h.update(json.dumps(desc.get("sha256") or desc, sort_keys=True).encode())
    out["sha256"] = h.hexdigest()
    return out


def _folder_files(folder: Path) -> dict[str, Path] | None:
    for cand in (folder, folder / "gsm8k"):
        files = {s: cand / f"{s}.jsonl" for s in SPLITS}
        if all(p.is_file() for p in files.values()):
            return files
    return None


def check_gsm8k_file(path: Path) -> None:
    """InputError naming the file (and line) unless it is UTF-8 JSON lines, at least one, each an
    object with text 'question' and 'answer': what lm-eval's loader needs, checked before it runs."""
    stat = path.stat()
    _check_gsm8k_file(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _check_gsm8k_file(path: str, _size: int, _mtime_ns: int) -> None:
    fix = f"GSM8K rows are JSON lines with text 'question' and 'answer', as in {HUB_DATASET}"
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); {fix}") from None
    rows = 0
    for number, line in enumerate(text.split("\n"), start=1):  # as the JSON-lines loader splits
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise InputError(f"{path}:{number}: not a JSON line; {fix}") from None
        missing = [
            k for k in ("question", "answer") if not isinstance(row, dict) or not isinstance(row.get(k), str)
        ]
        if missing:
            raise InputError(f"{path}:{number}: no text {' or '.join(map(repr, missing))}; {fix}")
        rows += 1
    if rows == 0:
        raise InputError(f"{path}: no rows; {fix}")


def _hub_offline_reason() -> str | None:
    for var in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError as exc:
        return f"huggingface.co unreachable ({exc.__class__.__name__})"
    return None


def locate_gsm8k(data_dir: str | os.PathLike | None = None, *, allow_hub: bool = True) -> GSM8KSource:
    """Find GSM8K: `data_dir`, then `$EVALKIT_DATA`, then the hub, then the bundled pinned copy."""
    looked = []
    named = False  # a folder the user named that lacks the files is an error, never a fallback
    for label, value in (("--data-dir", data_dir), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if not value:
            looked.append(f"{label} (not set)")
            continue
        named = True
        files = _folder_files(Path(value).expanduser())
        if files:
            for path in files.values():
                check_gsm8k_file(path)
            return _noted(GSM8KSource("local", files))
        looked.append(f"{label}={value} (no train.jsonl/test.jsonl there or in its gsm8k/)")
    if allow_hub and not named:
        reason = _hub_offline_reason()
        if reason is None:
            return _noted(GSM8KSource("hub"))
        looked.append(f"hub {HUB_DATASET} ({reason})")
    bundled = _folder_files(BUNDLED_DIR)
    if bundled and not named:
        return _noted(GSM8KSource("local", bundled))
    looked.append(
        f"the bundled copy {BUNDLED_DIR} ({'not used: a folder was named' if named else 'missing'})"
    )
    raise DataNotFoundError(
        "GSM8K not found; looked in "
        + "; ".join(looked)
        + f". Put train.jsonl and test.jsonl (rows with 'question' and 'answer', as in {HUB_DATASET}) "
        + f"in a folder and pass --data-dir DIR or set {ENV_VAR}=DIR"
    )


def find_gsm8k_files(data_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """Local jsonl files for each split; downloads from the hub into a cache when only it has them."""
    src = locate_gsm8k(data_dir)
    if src.kind == "local":
        return src.files
    return _hub_to_local_cache()


@lru_cache(maxsize=1)
def _hub_to_local_cache() -> dict[str, Path]:
    import datasets  # heavy; only on this path

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "evalkit" / "gsm8k"
    cache.mkdir(parents=True, exist_ok=True)
    files = {s: cache / f"{s}.jsonl" for s in SPLITS}
    if not all(p.is_file() for p in files.values()):
        ds = datasets.load_dataset(HUB_DATASET, HUB_CONFIG)
        for split, path in files.items():
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in ds[split]:
                    fh.write(json.dumps({"question": row["question"], "answer": row["answer"]}) + "\n")
            tmp.replace(path)
    return files


@lru_cache(maxsize=8)
def _read_jsonl(path: str) -> tuple[dict[str, str], ...]:
    with open(path, encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def load_rows(split: str, data_dir: str | os.PathLike | None = None) -> tuple[dict[str, str], ...]:
    """The rows of one GSM8K split, in file order (the same order lm-eval sees)."""
    return _read_jsonl(str(find_gsm8k_files(data_dir)[split]))
