"""Stable hashes: what a prompt was, and what a config was.

`prompt_hash` of a text prompt equals lm-eval's `prompt_hash` (sha256 of the UTF-8 prompt), so
evalkit runs and lm-eval `--log_samples` files pair up on it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON: the same object always gives the same string."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def prompt_hash(prompt: str | list[int] | list[dict]) -> str:
    """sha256 of the exact prompt: the text itself, the token ids as JSON, or the chat messages as JSON."""
    if isinstance(prompt, str):
        return _sha256(prompt)
    if isinstance(prompt, (list, tuple)):
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return _sha256(json.dumps(list(prompt), separators=(",", ":")))
        if all(isinstance(m, dict) for m in prompt):
            return _sha256(canonical_json(list(prompt)))
    raise TypeError(
        f"a prompt is a str, a list of token ids or a list of message dicts, not {type(prompt).__name__}"
    )


def config_hash(config: Any) -> str:
    """sha256 of a JSON-able config in canonical form (key order and whitespace do not matter)."""
    return _sha256(canonical_json(config))
