"""The token sequence a drift run reads: a text or token file, GSM8K text, or random ids (for
random-weight models, which have no tokenizer and no notion of text); a task's prompts are
`evalkit.drift.prompts.task_prompts`."""

from __future__ import annotations

import json
from typing import Any

import torch

from evalkit.errors import InputError
from evalkit.user_files import regular_file


def _fit(ids: list[int], length: int | None, what: str) -> list[int]:
    if length is None:
        return ids
    if len(ids) < length:
        raise InputError(f"{what} has {len(ids)} tokens, fewer than --length {length}")
    return ids[:length]


def from_file(path: str, tokenize, length: int | None) -> tuple[list[int], dict[str, Any]]:
    """A text file (tokenized), or a .json list of token ids."""
    p = regular_file(path, "--input")
    if p.suffix == ".json":
        try:
            ids = [int(x) for x in json.loads(p.read_text())]
        except (ValueError, TypeError) as exc:
            raise InputError(f"--input {path}: a .json input must be a list of token ids ({exc})") from None
        return _fit(ids, length, str(p)), {"source": f"token ids from {p.name}"}
    text = p.read_text(encoding="utf-8", errors="replace")
    return _fit(tokenize(text), length, str(p)), {"source": f"text file {p.name}"}


def gsm8k_text(
    tokenize, length: int, data_dir: str | None = None, start: int = 0
) -> tuple[list[int], dict[str, Any]]:
    """GSM8K train questions and worked solutions, in file order from item `start` (wrapping
    around), until `length` tokens."""
    from evalkit.tasks.data import load_rows
    from evalkit.tasks.long_context.haystacks import clean_gsm8k_text

    rows = load_rows("train", data_dir)
    if rows and start:
        k = start % len(rows)
        rows = rows[k:] + rows[:k]
    ids: list[int] = []
    n = 0
    step = 64
    while len(ids) < length and n < len(rows):
        n = min(len(rows), n + step)
        ids = tokenize("\n\n".join(clean_gsm8k_text(r["question"], r["answer"]) for r in rows[:n]))
        step *= 2
    what = f"GSM8K train text ({n} items from item {start})" if start else f"GSM8K train text ({n} items)"
    return _fit(ids, length, f"GSM8K train ({len(rows)} items)"), {"source": what}


def random_ids(vocab_size: int, length: int, seed: int = 0) -> tuple[list[int], dict[str, Any]]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (length,), generator=g).tolist()
    return ids, {"source": f"uniform random token ids (seed {seed})"}
