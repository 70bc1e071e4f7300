"""GSM8K-format (`#### N`) one- and two-step word problems, and prose sentences cut from them as a
stand-in essay haystack (GSM8K text is not available on the training machine)."""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = [
    "Tom",
    "Anna",
    "Ben",
    "Maria",
    "Sam",
    "Lucy",
    "Omar",
    "Mia",
    "Jack",
    "Nina",
    "Leo",
    "Emma",
    "Raj",
    "Zoe",
    "Ivan",
    "Sara",
]
ITEMS = [
    "apples",
    "pencils",
    "books",
    "stickers",
    "marbles",
    "cookies",
    "cards",
    "shells",
    "coins",
    "eggs",
    "flowers",
    "stamps",
    "toys",
    "candies",
    "balloons",
    "oranges",
]


@dataclass
class Problem:
    question: str
    solution: str  # worked steps; each step is `expression = value`
    answer: int

    def text(self) -> tuple[str, str]:
        """(context, answer): lm-eval's GSM8K `Question: ...\\nAnswer:` prompt and its target."""
        return f"Question: {self.question}\nAnswer:", f" {self.solution}\n#### {self.answer}"


def arithmetic_problem(rng: random.Random) -> Problem:
    """A one- or two-step word problem in GSM8K's answer format (`#### N`)."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    kind = rng.randrange(6)
    if kind == 0:
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        return Problem(
            f"{name} has {a} {item}. {name} gets {b} more {item}. How many {item} does {name} have now?",
            f"{name} has {a} + {b} = {a + b} {item} now.",
            a + b,
        )
    if kind == 1:
        a = rng.randint(10, 90)
        b = rng.randint(1, a - 1)
        return Problem(
            f"{name} had {a} {item} and gave {b} of them away. How many {item} are left?",
            f"{name} has {a} - {b} = {a - b} {item} left.",
            a - b,
        )
    if kind == 2:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return Problem(
            f"{name} buys {a} boxes of {item}. Each box holds {b} {item}. How many {item} does {name} buy?",
            f"{name} buys {a} * {b} = {a * b} {item}.",
            a * b,
        )
    if kind == 3:
        a, b = rng.randint(2, 20), rng.randint(2, 9)
        return Problem(
            f"One of the {item} costs ${a}. {name} buys {b} of them. How much does {name} spend?",
            f"{name} spends {a} * {b} = {a * b} dollars.",
            a * b,
        )
    if kind == 4:
        b = rng.randint(2, 9)
        q = rng.randint(2, 12)
        return Problem(
            f"{name} shares {b * q} {item} equally among {b} friends. How many {item} does each friend get?",
            f"Each friend gets {b * q} / {b} = {q} {item}.",
            q,
        )
    a, b = rng.randint(5, 40), rng.randint(2, 30)
    c = rng.randint(1, a + b - 1)
    return Problem(
        f"{name} has {a} {item}, finds {b} more and then loses {c}. How many {item} does {name} have?",
        f"After finding more, {name} has {a} + {b} = {a + b} {item}. After losing some, "
        f"{name} has {a + b} - {c} = {a + b - c} {item}.",
        a + b - c,
    )


def essay_sentences_for_training(rng: random.Random, n: int) -> list[str]:
    """Prose sentences (from generated word problems) as a stand-in essay haystack: GSM8K text is
    not available on the training machine."""
    out: list[str] = []
    while len(out) < n:
        p = arithmetic_problem(rng)
        out.extend(
            s.strip() + ("" if s.strip().endswith((".", "?")) else ".")
            for s in (p.question + " " + p.solution).replace("? ", "?|").replace(". ", ".|").split("|")
            if s.strip()
        )
    return out[:n]
