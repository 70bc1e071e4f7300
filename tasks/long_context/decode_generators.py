"""Generators of the decode-heavy tasks: answers of many items, each item scored on its own.

Long answers matter because a recurrent model's state is rounded after every generated token;
many small items make accuracy graded (a fraction of items right) and locatable (which position
of the answer failed). Each generator takes a `random.Random`, the number of noise filler units
(the length fitter's dial) and the number of items (the difficulty dial), and draws the items
before the filler so the fitter can resize a doc without changing its question.

- `copy_example`: N two-digit numbers given once, recalled in order after the filler;
- `recite_example`: M `key: value` facts scattered through the filler, recited for every key in
  a given (shuffled) order;
- `register_example`: a digit register changed by K operations scattered through the filler;
  the answer is the register after every step (mod 10).

`Example.answers` are the items in answer order; the training target is them joined by spaces.
"""

from __future__ import annotations

import random

from evalkit.tasks.long_context import words
from evalkit.tasks.long_context.generators import Example
from evalkit.tasks.long_context.haystacks import NOISE


def _scatter(rng: random.Random, n_filler: int, lines: list[str]) -> str:
    """`lines` in order at random places among `n_filler` noise units (positions drawn last)."""
    slots = sorted(rng.randint(0, n_filler) for _ in lines)
    out: list[str] = []
    j = 0
    for i in range(n_filler + 1):
        while j < len(lines) and slots[j] == i:
            out.append(lines[j])
            j += 1
        if i < n_filler:
            out.append(NOISE)
    return "\n".join(out)


COPY_INTRO = "Memorize the list of numbers below. After some irrelevant text I will ask you to repeat it."
COPY_QUESTION = "Repeat the list of numbers from the beginning, in order, separated by spaces."
COPY_PREFIX = "The list is:"


def copy_example(rng: random.Random, n_filler: int, n_items: int) -> Example:
    """N two-digit numbers (00-99) at the start, `n_filler` noise units, then the recall question."""
    items = [f"{rng.randrange(100):02d}" for _ in range(n_items)]
    listing = "List: " + " ".join(items) + ". End of list."
    text = "\n".join(p for p in (COPY_INTRO, listing, " ".join([NOISE] * n_filler), COPY_QUESTION) if p)
    return Example(text, COPY_PREFIX, items, [listing], {"units": n_filler, "items": n_items})


RECITE_INTRO = "Some facts of the form 'key: value' are hidden in the text below. Remember every one."
RECITE_PREFIX = "The values are:"


def recite_example(rng: random.Random, n_filler: int, n_keys: int) -> Example:
    """M distinct word keys with 3-digit values, scattered in order; asked back in a shuffled order.
    Each answer item is `key: value`."""
    keys: list[str] = []
    while len(keys) < n_keys:
        k = words.word_key(rng)
        if k not in keys:
            keys.append(k)
    values = [words.number_value(rng, 3) for _ in keys]
    facts = [f"{k}: {v}" for k, v in zip(keys, values)]
    order = list(range(n_keys))
    rng.shuffle(order)
    question = (
        "Give the value of each of these keys, in this order: " + ", ".join(keys[i] for i in order) + "."
    )
    body = _scatter(rng, n_filler, facts)
    text = "\n".join((RECITE_INTRO, body, question))
    answers = [facts[i] for i in order]
    return Example(text, RECITE_PREFIX, answers, facts, {"units": n_filler, "items": n_keys})


REGISTER_INTRO = (
    "A register holds one digit. It starts at {start}. The steps below change it, in order; "
    "every number is taken mod 10."
)
REGISTER_QUESTION = (
    "Write the register's value after every step, from step 1 to step {k}, separated by spaces."
)
REGISTER_PREFIX = "The values are:"


def register_example(rng: random.Random, n_filler: int, n_steps: int) -> Example:
    """A digit register, K steps `Step i: add d.` / `Step i: subtract d.` scattered in order
    through the filler; the answer is the register after each step (mod 10)."""
    start = rng.randrange(10)
    value, steps, answers = start, [], []
    for i in range(n_steps):
        d = rng.randint(1, 9)
        if rng.random() < 0.5:
            value = (value + d) % 10
            steps.append(f"Step {i + 1}: add {d}.")
        else:
            value = (value - d) % 10
            steps.append(f"Step {i + 1}: subtract {d}.")
        answers.append(str(value))
    body = _scatter(rng, n_filler, steps)
    text = "\n".join((REGISTER_INTRO.format(start=start), body, REGISTER_QUESTION.format(k=n_steps)))
    return Example(text, REGISTER_PREFIX, answers, steps, {"units": n_filler, "items": n_steps})
