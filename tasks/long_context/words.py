"""Word material for the generators, with no download: a shipped JSON of common English
adjectives, nouns and verbs (written for evalkit), plus pronounceable pseudo-words made
deterministically from an rng when a task needs more distinct words than the lists hold
(RULER's cwe needs thousands at 32k+ tokens)."""

from __future__ import annotations

import json
import random
import uuid
from functools import lru_cache
from pathlib import Path

_WORDS_FILE = Path(__file__).with_name("words.json")

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"


@lru_cache(maxsize=1)
def _lists() -> dict[str, tuple[str, ...]]:
    data = json.loads(_WORDS_FILE.read_text())
    return {k: tuple(v) for k, v in data.items() if isinstance(v, list)}


def adjectives() -> tuple[str, ...]:
    return _lists()["adjectives"]


def nouns() -> tuple[str, ...]:
    return _lists()["nouns"]


@lru_cache(maxsize=1)
def common_words() -> tuple[str, ...]:
    """Every distinct shipped word (adjectives, nouns, verbs), sorted."""
    lists = _lists()
    return tuple(sorted(set(lists["adjectives"]) | set(lists["nouns"]) | set(lists["verbs"])))


def word_key(rng: random.Random) -> str:
    """An adjective-noun key such as `brave-otter` (RULER's `words` needle key)."""
    return f"{rng.choice(adjectives())}-{rng.choice(nouns())}"


def number_value(rng: random.Random, digits: int = 7) -> str:
    """A random number with exactly `digits` digits (RULER's `numbers` needle value)."""
    return str(rng.randint(10 ** (digits - 1), 10**digits - 1))


def uuid_value(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def letters(rng: random.Random, k: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    return "".join(rng.choice(alphabet) for _ in range(k))


def pseudo_word(rng: random.Random, syllables: int = 3) -> str:
    """A pronounceable made-up word (consonant-vowel syllables), e.g. `tabovi`."""
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def distinct_words(rng: random.Random, n: int) -> list[str]:
    """`n` distinct words in random order: shipped English words first, then pseudo-words."""
    pool = list(common_words())
    rng.shuffle(pool)
    if n <= len(pool):
        return pool[:n]
    seen = set(pool)
    out = pool
    while len(out) < n:
        w = pseudo_word(rng, syllables=rng.choice((2, 3, 3, 4)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out
