"""Per-item scoring of the decode-heavy tasks: which items of an answer are right, in answer order.

Two rules:
- `ordered_items`: the response's whitespace-separated words (punctuation stripped at their
  ends) are compared position by position with the reference items (copy, register values);
  a dropped or extra word shifts every later position, as exact copying demands;
- `found_items`: item i is right when its reference string (`key: value`) occurs anywhere in
  the response, case-insensitive (RULER's substring rule, one flag per item; recitation).

The sample's metric is then the exact-match bit (all items right) with the fraction of items
right as its score, and the flags themselves are stored as `item_correct` for the analysis of
accuracy by position (`evalkit.compare.positions`)."""

from __future__ import annotations

import re

from evalkit.tasks.long_context.scoring import found, postprocess

_WORD = re.compile(r"\S+")
_EDGE = ".,;:!?\"'()[]"


def response_words(response: str) -> list[str]:
    return [w.strip(_EDGE) for w in _WORD.findall(postprocess(response)) if w.strip(_EDGE)]


def ordered_items(response: str, items: list[str]) -> list[bool]:
    """Position-by-position equality of the response's words with `items`."""
    got = response_words(response)
    return [i < len(got) and got[i].lower() == item.lower() for i, item in enumerate(items)]


def found_items(response: str, items: list[str]) -> list[bool]:
    """Whether each item's reference string occurs in the response."""
    hits = set(found(response, items))
    return [item in hits for item in items]


RULES = {"ordered": ordered_items, "found": found_items}  # by name, for lm-eval's doc rows
