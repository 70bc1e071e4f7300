"""An on-disk cache of built long-context requests, so that fitting a 128k document to its exact
length (seconds of tokenization) is paid once per (task, length, seed, tokenizer, task config), not
once per arm and per re-run.

One JSON file per doc: `<root>/<task>/<key>/<target>-<index>.json`, where `key` hashes the task's
name and config (which carries the generators' VERSION), the tokenizer's fingerprint, the shared
material the docs draw from (e.g. haystack sentences), the seed and the chat flag. A file is
written atomically (temp file + rename) and read back into an equal `TaskRequest`, the prompt's
token ids included (base64 of little-endian int32: a warm run then tokenizes no prompt at all); an
unreadable file, or ids whose count is not the doc's length, is a miss. Root:
`EVALKIT_PROMPT_CACHE` ("off" disables it), else `$XDG_CACHE_HOME/evalkit/prompts`
(`~/.cache/evalkit/prompts`)."""

from __future__ import annotations

import base64
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


def ids_to_text(ids: Any) -> str | None:
    """Token ids as base64 of little-endian int32 (for 130k ids: 0.7 MB and about 20 ms to write and
    read back, against 0.9 MB and 40 ms as a JSON list); None stays None."""
    if ids is None:
        return None
    a = array("i", ids)
    if sys.byteorder == "big":
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def ids_from_text(text: str | None) -> array | None:
    if text is None:
        return None
    a = array("i")
    a.frombytes(base64.b64decode(text))
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
        "prompt_ids": ids_to_text(req.prompt_ids),
    }


def _from_json(d: dict[str, Any]) -> TaskRequest:
    ids = ids_from_text(d["prompt_ids"])
    if ids is not None and len(ids) != d["meta"].get("length", len(ids)):
        raise ValueError("cached prompt ids do not match the doc's length")
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

    def _path(self, target: int, index: int) -> Path:
        return self.folder / f"{target}-{index}.json"

    def get(self, target: int, index: int) -> TaskRequest | None:
        try:
            return _from_json(json.loads(self._path(target, index).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, target: int, index: int, req: TaskRequest) -> None:
        """Store one doc; a cache that cannot be written is not an error (the run goes on uncached)."""
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(_to_json(req), f, ensure_ascii=False)
            os.replace(tmp, self._path(target, index))
        except OSError:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
