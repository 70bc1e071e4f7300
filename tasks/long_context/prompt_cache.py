"""An on-disk cache of built long-context requests, so that fitting a 128k document to its exact
length (seconds of tokenization) is paid once per (task, length, seed, tokenizer, task config), not
once per arm and per re-run.

One JSON file per doc: `<root>/<task>/<key>/<target>-<index>.json`, where `key` hashes the task's
name and config (which carries the generators' VERSION), the tokenizer's fingerprint, the shared
material the docs draw from (e.g. haystack sentences), the seed and the chat flag. A file is
written atomically (temp file + rename) and read back into an equal `TaskRequest`, the prompt's
token ids included (little-endian int32 in `<target>-<index>.ids`, written before the JSON file: a
warm run then tokenizes no prompt at all); an unreadable file, or ids whose count is not the doc's
length, is a miss. Root:
`EVALKIT_PROMPT_CACHE` ("off" disables it), else `$XDG_CACHE_HOME/evalkit/prompts`
(`~/.cache/evalkit/prompts`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import sys
import tempfile
from array import array
from pathlib import Path
from typing import Any

from evalkit.tasks.base import DocRef, TaskRequest

# bump when the stored layout or request building changes meaning (2: DocRef.gold kept; 3: prompt ids)
CACHE_FORMAT = 3
ENV = "EVALKIT_PROMPT_CACHE"
OFF = {"off", "0", "none", "false", ""}


def cache_root() -> Path | None:
    """The cache folder, or None when caching is off."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in OFF else Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "evalkit" / "prompts"


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of what decides a tokenization: the fast tokenizer's full serialisation where there is
    one, else the vocabulary; plus the class, special tokens and chat template."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)  # a TokenizerView
    backend = getattr(tok, "backend_tokenizer", tok)
    if hasattr(backend, "to_str"):
        body = backend.to_str()
    else:
        body = json.dumps(sorted(tok.get_vocab().items()), ensure_ascii=False)
    extra = {
        "class": type(tok).__name__,
        "special": getattr(tok, "special_tokens_map", None),
        "chat_template": getattr(tok, "chat_template", None),
        "bos": getattr(tok, "add_bos_token", None),
    }
    return _sha(body, json.dumps(extra, sort_keys=True, default=str))


def material_fingerprint(ctx: Any) -> str | None:
    """sha256 of the shared material docs are drawn from; None if it cannot be serialised (no cache)."""
    try:
        return _sha(pickle.dumps(ctx, protocol=4))
    except Exception:  # noqa: BLE001
        return None


def ids_to_bytes(ids: Any) -> bytes:
    """Token ids as little-endian int32 (a 130k-id prompt: 0.5 MB, read back in a millisecond; as
    base64 inside the JSON they took 25 ms to decode, as a JSON list 40 ms)."""
    a = array("i", ids)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def ids_from_bytes(data: bytes) -> array:
    a = array("i")
    a.frombytes(data)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _to_json(req: TaskRequest) -> dict[str, Any]:
    return {
        "task": req.task,
        "prompt": req.prompt,
        "max_new_tokens": req.max_new_tokens,
        "until": req.until,
        "docs": [dataclasses.asdict(d) for d in req.docs],
        "length": req.length,
        "meta": req.meta,
        "n_prompt_ids": None if req.prompt_ids is None else len(req.prompt_ids),  # in the .ids file
    }


def _from_json(d: dict[str, Any], ids: array | None = None) -> TaskRequest:
    return TaskRequest(
        task=d["task"],
        prompt=d["prompt"],
        max_new_tokens=d["max_new_tokens"],
        until=d["until"],
        docs=[DocRef(**x) for x in d["docs"]],
        length=d["length"],
        meta=d["meta"],
        prompt_ids=ids,
    )


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PromptCache:
    """The cached docs of one task, tokenizer, material, seed and chat flag."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def open(cls, task: Any, tokenizer: Any, ctx: Any, seed: int, chat: bool) -> PromptCache | None:
        """The cache for these docs, or None when caching is off or the tokenizer or the material
        cannot be fingerprinted."""
        root = cache_root()
        material = material_fingerprint(ctx)
        if root is None or material is None:
            return None
        from evalkit.store import config_hash

        try:
            tok = tokenizer_fingerprint(tokenizer)
        except Exception:  # noqa: BLE001 -- a tokenizer we cannot fingerprint is built uncached
            return None
        key = _sha(
            str(CACHE_FORMAT), task.name, config_hash(task.config()), tok, material, str(seed), str(chat)
        )
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in task.name)
        return cls(root / safe / key[:32])

    def _path(self, target: int, index: int, suffix: str = ".json") -> Path:
        return self.folder / f"{target}-{index}{suffix}"

    def get(self, target: int, index: int) -> TaskRequest | None:
        try:
            d = json.loads(self._path(target, index).read_text(encoding="utf-8"))
            n, ids = d["n_prompt_ids"], None
            if n is not None:
                ids = ids_from_bytes(self._path(target, index, ".ids").read_bytes())
                if not len(ids) == n == d["meta"].get("length", n):
                    return None  # a stale or torn ids file: build the doc again
            return _from_json(d, ids)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, target: int, index: int, req: TaskRequest) -> None:
        """Store one doc, its ids first: the JSON file, renamed into place last, makes it visible. A
        cache that cannot be written is not an error (the run goes on uncached)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if req.prompt_ids is not None:
                _write_atomic(self._path(target, index, ".ids"), ids_to_bytes(req.prompt_ids))
            text = json.dumps(_to_json(req), ensure_ascii=False)
            _write_atomic(self._path(target, index), text.encode("utf-8"))
        except OSError:
            pass
