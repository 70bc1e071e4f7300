"""The training families: one `generators.Example` per family from evalkit's own long-context
generators (training seeds), with the variant drawn per example."""

from __future__ import annotations

import math
import random
from types import ModuleType
from typing import TYPE_CHECKING

from evalkit.refmodel.arithmetic import arithmetic_problem
from evalkit.refmodel.settings import Settings
from evalkit.refmodel.tokenizer import BOS, IM_END, IM_START

if TYPE_CHECKING:
    from evalkit.tasks.long_context.generators import Example


def gens() -> ModuleType:
    """evalkit's long-context generators (imported lazily so --help works anywhere)."""
    try:
        from evalkit.tasks.long_context import generators
    except ImportError as exc:  # pragma: no cover - setup problem
        raise SystemExit(
            f"cannot import evalkit's task generators ({exc}); run `pip install -e '.[engine]'` "
            "in the checkout"
        ) from None
    return generators


# decode-heavy families: (generator name, fewest items, most items, ~tokens per item in the row
# (context + answer), fixed tokens). Item counts are drawn log-uniformly up to what the row holds,
# so short rows teach the format and long rows reach past the evaluated variants (24/96 numbers,
# 8/32 keys, 32/144 steps): accuracy then falls across the model's capacity instead of at a cliff.
DECODE_ITEMS = {
    "copy": ("copy_example", 2, 160, 6.5, 60),
    "recite": ("recite_example", 1, 48, 26.0, 80),
    "register": ("register_example", 2, 192, 12.0, 80),
}


def decode_items(family: str, rng: random.Random, row_tokens: int | None) -> int:
    """The item count of one decode-heavy example, log-uniform in the family's range, capped by
    what fits `row_tokens` (no cap when None)."""
    _, lo, hi, per_item, fixed = DECODE_ITEMS[family]
    if row_tokens is not None:
        hi = max(lo, min(hi, int((row_tokens - fixed) / per_item)))
    return max(lo, min(hi, round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))


def build_example(
    family: str, rng: random.Random, n_units: int, sentences: list[str], row_tokens: int | None = None
) -> Example:
    """One `generators.Example` of a training family with `n_units` haystack units; the variant
    (depth, number of keys, hops, items, ...) is drawn from `rng` (decode-heavy item counts capped
    by `row_tokens`)."""
    g = gens()
    if family in DECODE_ITEMS:
        from evalkit.tasks.long_context import decode_generators

        make = getattr(decode_generators, DECODE_ITEMS[family][0])
        return make(rng, n_units, decode_items(family, rng, row_tokens))
    if family == "passkey":
        return g.passkey_example(rng, n_units, depth=rng.random())
    if family == "niah_single":
        return g.niah_example(rng, n_units, haystack="noise")
    if family == "niah_distractors":  # RULER multikey_1 shape, noise haystack
        return g.niah_example(rng, n_units, haystack="noise", num_keys=rng.randint(2, 8))
    if family == "niah_needles":  # RULER multikey_2: every haystack line is a distractor needle
        return g.niah_example(rng, max(n_units, 1), haystack="needle")
    if family == "niah_multi":  # multivalue / multiquery
        haystack = rng.choice(["noise", "essay"])
        if rng.random() < 0.5:
            return g.niah_example(
                rng, n_units, haystack=haystack, num_values=rng.randint(2, 4), sentences=sentences
            )
        return g.niah_example(
            rng, n_units, haystack=haystack, num_queries=rng.randint(2, 4), sentences=sentences
        )
    if family == "niah_essay":
        return g.niah_example(
            rng, n_units, haystack="essay", num_keys=rng.choice([1, 1, 2, 4]), sentences=sentences
        )
    if family == "vt":
        hops = rng.choice([2, 3, 4, 4, 4, 5, 6])
        return g.vt_example(rng, n_units, num_hops=hops, icl_noise=rng.randint(1, 12))
    if family == "kv":
        key_kind = rng.choice(["word", "word", "word", "letters"])
        value_kind = rng.choice(["number", "number", "short_number"])
        return g.kv_example(rng, max(n_units, 1), key_kind=key_kind, value_kind=value_kind)
    raise ValueError(f"unknown training family {family!r}")


def chat_prompt(ex: Example) -> str:
    """The ChatML rendering of `ex` with the answer prefix as a prefilled assistant turn (what
    `TokenizerView.render_chat` produces for the reference tokenizer; a test checks that)."""
    return (
        f"{BOS}{IM_START}user\n{ex.text}{IM_END}\n{IM_START}assistant\n{ex.gen_prefix}"
        if ex.gen_prefix
        else f"{BOS}{IM_START}user\n{ex.text}{IM_END}\n{IM_START}assistant\n"
    )


def tokenizer_corpus(s: Settings, sentences: list[str]) -> list[str]:
    """Training text for the BPE: every family at small sizes, arithmetic problems, chat turns."""
    g = gens()
    families = [f for f in s.mixture if f != "arithmetic"]
    out = []
    for i in range(s.tokenizer_docs):
        rng = g.training_rng(s.seed + 10**9 + i)
        fam = families[i % len(families)]
        ex = build_example(fam, rng, rng.randint(1, 12), sentences)
        out.append(ex.prompt + " " + ex.answer)
        q, a = arithmetic_problem(rng).text()
        out.append(q + a)
    return out
