"""How a prompt becomes token ids: the one definition, shared by the engine (`LLMEngine.encode`),
the local backend and `evalkit serve`, which is what makes a run through the server equal an
in-process run. Imports nothing heavy (a light install loads it with the backends)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from evalkit.errors import InputError


def encode_prompt(tokenizer: Any, prompt: str | Sequence[int] | list[dict[str, str]]) -> list[int]:
    """Text as vLLM's /v1/completions tokenizes it (the tokenizer's special tokens included);
    chat messages through the chat template with a generation prompt, as /v1/chat/completions;
    token ids as they are."""
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], dict)):
        if tokenizer is None:
            raise InputError("this model has no tokenizer; pass token ids")
        if isinstance(prompt, str):
            return list(tokenizer.encode(prompt))
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        return list(tokenizer.encode(text, add_special_tokens=False))
    if isinstance(prompt, array):  # ids already ints (a task's or the encode cache's): no per-id loop
        return prompt.tolist()
    return [int(t) for t in prompt]
