"""Haystack text: RULER's noise block, and GSM8K train text split into sentences as the
stand-in for RULER's Paul Graham essays (which need a download). The sentence splitter is a
regex, so no NLTK data is needed."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

# RULER's "repeat"/noise haystack unit, also the landmark-attention passkey filler.
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

_CALC = re.compile(r"<<[^>]*>>")  # GSM8K calculator annotations: 48/2=<<48/2=24>>24
_FINAL = re.compile(r"\n?#### .*$", re.S)  # the final "#### N" line
# Split after . ! ? (optionally followed by a closing quote/bracket) and whitespace, before a
# capital, digit, quote or $; also at newlines.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'$(])|\s*\n+\s*")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` by a regex rule (good enough for GSM8K prose; no NLTK)."""
    parts = []
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        # keep closing quotes/brackets with the sentence they close
        end = m.start() + len(m.group(0)) - len(m.group(0).lstrip("\"')]"))
        piece = text[pos:end].strip()
        if piece:
            parts.append(piece)
        pos = m.end()
    tail = text[pos:].strip()
    if tail:
        parts.append(tail)
    return [" ".join(p.split()) for p in parts]


def clean_gsm8k_text(question: str, answer: str) -> str:
    """A GSM8K train item as plain prose: the question and its worked solution, without the
    calculator annotations and the final `#### N` line."""
    solution = _FINAL.sub("", _CALC.sub("", answer)).strip()
    return f"{question.strip()}\n{solution}"


@lru_cache(maxsize=4)
def gsm8k_sentences(train_file: str) -> tuple[str, ...]:
    """All sentences of the GSM8K train split in file order (about 45k sentences, ~1M tokens)."""
    out: list[str] = []
    with open(train_file, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out.extend(split_sentences(clean_gsm8k_text(row["question"], row["answer"])))
    return tuple(out)


def essay_sentences(data_dir: str | Path | None = None) -> tuple[str, ...]:
    """The essay-haystack sentences, from GSM8K train found the usual way (see `tasks.data`)."""
    from evalkit.tasks.data import find_gsm8k_files

    files = find_gsm8k_files(data_dir)
    return gsm8k_sentences(str(files["train"]))
