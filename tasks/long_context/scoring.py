"""RULER's scoring: a prediction is stripped and its control characters turned into newlines;
`string_match_all` is the fraction of reference strings found in it (case-insensitive
substring), `string_match_part` is 1 when any is found."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess(prediction: str) -> str:
    return _CONTROL.sub("\n", prediction.strip()).strip()


def found(prediction: str, references: list[str]) -> list[str]:
    pred = postprocess(prediction).lower()
    return [r for r in references if r.lower() in pred]


def string_match_all(prediction: str, references: list[str]) -> float:
    return len(found(prediction, references)) / len(references)


def string_match_part(prediction: str, references: list[str]) -> float:
    return 1.0 if found(prediction, references) else 0.0
