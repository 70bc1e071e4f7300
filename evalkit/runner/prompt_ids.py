"""Whether the token ids a task computed for its prompts may stand in for the backend's own encoding.

A sized long-context task tokenizes every prompt to measure it (`TaskRequest.prompt_ids`); handing
those ids to the engine spares a second tokenization of every 128k-token prompt (about 0.25 s each
on one core, most of a warm run's time outside the engine). They are only valid for the tokenizer
the task was built with, so they are passed on only when the backend encodes with that tokenizer."""

from __future__ import annotations

from typing import Any


def same_tokenizer(task_tokenizer: Any, backend: Any) -> bool:
    """True when `backend` encodes with `task_tokenizer`: the same object (a local run hands the
    engine's tokenizer to the tasks), or one with the same fingerprint."""
    theirs = getattr(backend, "tokenizer", None)
    if theirs is None or task_tokenizer is None:
        return False
    if theirs is task_tokenizer:
        return True
    from evalkit.tasks.long_context.prompt_cache import tokenizer_fingerprint

    try:
        return tokenizer_fingerprint(theirs) == tokenizer_fingerprint(task_tokenizer)
    except Exception:  # noqa: BLE001 -- a tokenizer we cannot fingerprint: the backend encodes itself
        return False
