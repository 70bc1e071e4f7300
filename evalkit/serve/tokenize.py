"""Tokenizing requests without letting one client's prompt hold up another's.

- A cheap bound first: a token covers at most `longest_token_chars` characters, so a text longer
  than that times the context already has more tokens than the model takes; it is refused before
  any tokenizing (an 8 MB prompt costs nothing).
- Two lanes, off the event loop: short texts on one thread, long ones on another, so a long prompt
  being tokenized (seconds) never queues the short requests behind it. The long lane gets its own
  copy of the tokenizer where one can be made (a fast tokenizer is not safe to share between
  threads that tokenize at the same time).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from evalkit.prompt_ids import encode_prompt

T = TypeVar("T")
LONG_CHARS = 32_768  # a text above this goes to the long lane (about 10 ms of tokenizing and up)


def _utf8_len(token: str | bytes) -> int:
    return len(token) if isinstance(token, bytes) else len(token.encode("utf-8", "surrogatepass"))


def longest_token_chars(tokenizer: Any) -> int | None:
    """An upper bound on the characters of text one token covers: the most UTF-8 bytes of any
    vocabulary entry. A character takes at least one byte of some token, and an entry's spelling
    (byte-level, SentencePiece, or bytes decoded with replacement characters) takes at least as
    many bytes as the text it stands for. None if the tokenizer has no vocabulary to read."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 -- a tokenizer without a vocabulary: no bound
        return None
    return max((_utf8_len(k) for k in vocab), default=0) or None


def text_chars(prompt: Any) -> int:
    """Characters of text to tokenize: a string, or chat messages' contents (0 for token ids)."""
    if isinstance(prompt, str):
        return len(prompt)
    if prompt and isinstance(prompt[0], dict):
        return sum(len(str(m.get("content") or "")) for m in prompt)
    return 0


def _copy_of(tokenizer: Any) -> Any:
    try:
        return copy.deepcopy(tokenizer)
    except Exception:  # noqa: BLE001 -- not copyable: share it (the lanes then rarely overlap)
        return tokenizer


class TokenizerLanes:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.long_tokenizer = _copy_of(tokenizer)
        self.max_token_chars = longest_token_chars(tokenizer)
        self.short = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-tokenize")
        self.long = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-tokenize-long")

    def too_long(self, prompt: Any, max_tokens: int | None) -> str | None:
        """Why `prompt` must have more than `max_tokens` tokens, judged from its length alone."""
        if max_tokens is None or not self.max_token_chars:
            return None
        chars = text_chars(prompt)
        if chars > self.max_token_chars * max_tokens:
            return (
                f"the prompt has {chars} characters: at least {-(-chars // self.max_token_chars)} tokens, "
                f"more than the model's context of {max_tokens}"
            )
        return None

    async def run(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """`fn(tokenizer, *args)` on the lane for work of `size` characters or tokens."""
        loop = asyncio.get_running_loop()
        if size > LONG_CHARS:
            return await loop.run_in_executor(self.long, fn, self.long_tokenizer, *args)
        return await loop.run_in_executor(self.short, fn, self.tokenizer, *args)

    async def encode(self, prompt: Any) -> list[int]:
        return await self.run(text_chars(prompt), encode_prompt, prompt)
