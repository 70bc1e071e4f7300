"""One view over the tokenizers a task may be handed (a transformers tokenizer, or a bare
`tokenizers.Tokenizer`): count tokens as the model will see them, find the token holding a
character, render a chat template, and fingerprint the tokenizer for reproducibility.

Counting rule: plain-text prompts are encoded with the tokenizer's special tokens (a BOS if it
adds one, as vLLM's completions endpoint does); chat-rendered prompts without them, since the
template already writes them (as transformers' `apply_chat_template(tokenize=True)` does).
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from typing import Any

from evalkit.errors import InputError

# how a user gives a tokenizer where none comes with the model (a server's run)
TOKENIZER_HINT = "with --server, pass --tokenizer (the served model's folder or hub id)"
MEMO_MIN_CHARS = 20_000  # texts this long keep their encoding (a 4k-token doc and up)
MEMO_ENTRIES = 4  # the fit's last few evaluations: the one it picks is almost always among them


class TokenizerView:
    def __init__(self, tokenizer: Any):
        if tokenizer is None:
            raise InputError(
                f"this task sizes prompts in the model's tokens and needs its tokenizer; {TOKENIZER_HINT}"
            )
        if isinstance(tokenizer, TokenizerView):
            tokenizer = tokenizer.tokenizer
        self.tokenizer = tokenizer
        # a bare `tokenizers.Tokenizer` has encode(...) -> Encoding, and no __call__
        self._bare = not callable(tokenizer) and hasattr(tokenizer, "encode_batch")
        self._recent: list[tuple[str, bool, list[int], list[tuple[int, int]] | None]] = []

    # -- counting ---------------------------------------------------------------------------
    def _encode(
        self, text: str, special: bool, offsets: bool
    ) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Ids (and character offsets) of `text`. Long texts keep their encoding, offsets
        included, for the next few calls: fitting a long-context doc counts the prompt it then
        encodes again (with offsets, to place the needles), and at 128k that second
        tokenization was about half of a doc's building time."""
        if len(text) < MEMO_MIN_CHARS:
            return self._tokenize(text, special, offsets)
        for t, sp, ids, offs in self._recent:
            if sp == special and t == text and (offs is not None or not offsets or not self._has_offsets):
                return list(ids), (offs if offsets else None)  # a copy: callers may extend theirs
        ids, offs = self._tokenize(text, special, self._has_offsets)
        self._recent = [(text, special, ids, offs), *self._recent[: MEMO_ENTRIES - 1]]
        return list(ids), (offs if offsets else None)

    @property
    def _has_offsets(self) -> bool:
        return self._bare or bool(getattr(self.tokenizer, "is_fast", False))

    def _tokenize(
        self, text: str, special: bool, offsets: bool
    ) -> tuple[list[int], list[tuple[int, int]] | None]:
        tok = self.tokenizer
        if self._bare:
            enc = tok.encode(text, add_special_tokens=special)
            return enc.ids, (enc.offsets if offsets else None)
        if offsets and getattr(tok, "is_fast", False):
            out = tok(text, add_special_tokens=special, return_offsets_mapping=True)
            return out["input_ids"], [tuple(o) for o in out["offset_mapping"]]
        return tok(text, add_special_tokens=special)["input_ids"], None

    def encode(self, text: str, *, chat: bool = False) -> list[int]:
        return self._encode(text, not chat, False)[0]

    def count(self, text: str, *, chat: bool = False) -> int:
        return len(self.encode(text, chat=chat))

    def count_many(self, texts: list[str], *, chat: bool = False) -> list[int]:
        """Token counts of many texts in one batched call."""
        tok = self.tokenizer
        if self._bare:
            return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=not chat)]
        return [len(ids) for ids in tok(texts, add_special_tokens=not chat)["input_ids"]]

    def measure(self, text: str, needles: list[str], *, chat: bool = False) -> tuple[int, list[int | None]]:
        """(token count, token index of the first token of each needle in `text`)."""
        ids, positions = self.encode_measure(text, needles, chat=chat)
        return len(ids), positions

    def encode_measure(
        self, text: str, needles: list[str], *, chat: bool = False
    ) -> tuple[list[int], list[int | None]]:
        """`measure`, with the token ids themselves in place of their count (one tokenization)."""
        ids, offsets = self._encode(text, not chat, True)
        positions: list[int | None] = []
        starts = _monotone([s if e > s else -1 for s, e in offsets]) if offsets is not None else []
        for needle in needles:
            char = text.find(needle)
            if char < 0:
                positions.append(None)
            elif offsets is not None:
                # the last token starting at or before `char`
                positions.append(max(bisect_right(starts, char) - 1, 0))
            else:
                positions.append(len(self._encode(text[:char], not chat, False)[0]))
        return ids, positions

    # -- chat ----------------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def render_chat(self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """The template's text, the way lm-eval's HF model renders it (a final assistant
        message is continued when no generation prompt is added)."""
        if self._bare:
            from evalkit.extras import install_hint

            raise InputError(
                "rendering the chat template needs transformers, which a light install lacks: "
                f"{install_hint()} (or leave out --tokenizer: a chat server renders it)"
            )
        if not self.has_chat_template:
            raise InputError("--apply-chat-template needs a tokenizer with a chat template")
        return self.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )

    # -- identity ------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        tok = self.tokenizer
        backend = tok if self._bare else getattr(tok, "backend_tokenizer", None)
        if backend is not None:
            blob = backend.to_str()
        else:
            blob = json.dumps(sorted(tok.get_vocab().items()))
        h = hashlib.sha256(blob.encode())
        h.update(str(getattr(tok, "chat_template", "") or "").encode())
        return {
            "name": getattr(tok, "name_or_path", None) or type(tok).__name__,
            "vocab_size": (tok.get_vocab_size() if self._bare else len(tok)),
            "sha256": h.hexdigest()[:16],
        }


def load_bare_tokenizer(name_or_path: str) -> Any:
    """A `tokenizers.Tokenizer` from a folder's tokenizer.json or a hub id, for installs without
    transformers (`evalkit run --server` on a light install): it counts tokens as the model's
    fast tokenizer does; chat templates still need transformers."""
    from pathlib import Path

    from tokenizers import Tokenizer

    path = Path(name_or_path).expanduser()
    try:
        if path.is_dir():
            return Tokenizer.from_file(str(path / "tokenizer.json"))
        if path.is_file():
            return Tokenizer.from_file(str(path))
        return Tokenizer.from_pretrained(name_or_path)
    except Exception as exc:  # noqa: BLE001 -- tokenizers raises bare Exceptions
        raise InputError(
            f"cannot load the tokenizer from {name_or_path} (without transformers only a "
            f"tokenizer.json works): {exc}"
        ) from exc


def _monotone(starts: list[int]) -> list[int]:
    """Offsets made non-decreasing (special tokens have empty spans marked -1)."""
    out, last = [], 0
    for s in starts:
        last = max(last, s)
        out.append(last)
    return out
