"""A long-context task's prompt as the plain text drift reads: built without the chat template,
refused when the task builds a chat, and its request metadata reduced to what a run records.
Shared by the single-prompt input (`inputs`) and the N prompts of a study (`prompts`)."""

from __future__ import annotations

from typing import Any

from evalkit.errors import InputError


def plain_task_requests(
    name: str,
    tokenizer,
    length: int,
    limit: int,
    seed: int | None,
    data_dir: str | None = None,
    show_progress: bool = True,
) -> list:
    """Up to `limit` plain-text requests of a long-context task built for `length` tokens."""
    from evalkit.tasks.registry import get_task

    if tokenizer is None:
        raise InputError("--task needs the model's tokenizer; this model has none (use --random-tokens)")
    return get_task(name).requests(
        tokenizer=tokenizer,
        lengths=[length],
        limit=limit,
        seed=seed,
        data_dir=data_dir,
        apply_chat_template=False,
        show_progress=show_progress,
    )


def plain_text(name: str, prompt: Any) -> str:
    """The prompt, refused when the task built a chat (a list of messages) instead of text."""
    if not isinstance(prompt, str):
        raise InputError(f"task {name} builds chat prompts; drift needs a plain text prompt")
    return prompt


def scalar_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The request metadata worth recording with a prompt: its scalar values."""
    return {k: v for k, v in meta.items() if isinstance(v, (int, float, str, type(None)))}
