"""The decode-heavy tasks as evalkit tasks: copy, key-value recitation and register tracking,
each in a short and a long-answer variant (the item count is the difficulty dial; `items=N`
as a task option overrides it).

Scoring (`itemwise`): metric `item_match_all` is the exact-match bit (every item right; what
McNemar pairs) and its score the fraction of items right; the per-item flags are kept as the
sample's `item_correct` (answer order), for accuracy by position in the answer. The generation
budget is a few tokens per item above the reference answer's length (set per tokenizer-free
item size), so a run records how many tokens were actually generated (`n_generated`)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from evalkit.tasks.base import ScoredDoc, TaskRequest
from evalkit.tasks.long_context import decode_generators as dg
from evalkit.tasks.long_context.base import SizedTask
from evalkit.tasks.long_context.generators import Example
from evalkit.tasks.long_context.itemwise import found_items, ordered_items

METRIC = "item_match_all"
SHORT_LENGTHS = [1024, 2048, 4096, 8192, 16384]
LONG_LENGTHS = [2048, 4096, 8192, 16384]


class DecodeHeavyTask(SizedTask):
    """A sized task whose answer is a list of items scored one by one."""

    metrics = [METRIC]
    n_min = 0
    num_docs = 50
    make: Callable[[random.Random, int, int], Example]
    rule: Callable[[str, list[str]], list[bool]]
    rule_name: str = "ordered"  # the rule's key in itemwise.RULES (lm-eval's rows carry it)
    tokens_per_item: int = 4

    def __init__(
        self,
        name: str,
        description: str,
        params: dict[str, Any],
        default_lengths: list[int],
        **options: Any,
    ):
        self.name, self.description, self.params = name, description, params
        self.default_lengths = default_lengths
        super().__init__(**options)
        if options.get("max_new_tokens") is None:
            self.max_new_tokens = int(self.params["items"]) * self.tokens_per_item + 16

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> Example:
        return type(self).make(rng, n_units, int(self.params["items"]))

    def lm_eval_rows(self, **kwargs: Any) -> list[dict[str, Any]]:
        return [{**row, "item_rule": self.rule_name} for row in super().lm_eval_rows(**kwargs)]

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        doc = request.docs[0]
        refs = doc.meta["answers"]
        flags = type(self).rule(response, refs)
        frac = sum(flags) / len(flags)
        return [
            ScoredDoc(
                doc.doc_id,
                doc.target,
                {METRIC: all(flags)},
                {"items_right": f"{sum(flags)}/{len(flags)}"},
                {METRIC: frac},
                item_correct=flags,
            )
        ]


class CopyTask(DecodeHeavyTask):
    make = staticmethod(dg.copy_example)
    rule = staticmethod(ordered_items)
    tokens_per_item = 4  # two digits and a space in a digit-splitting BPE, plus slack


class ReciteTask(DecodeHeavyTask):
    make = staticmethod(dg.recite_example)
    rule = staticmethod(found_items)
    rule_name = "found"
    tokens_per_item = 14  # `adjective-noun: 123,`


class RegisterTask(DecodeHeavyTask):
    make = staticmethod(dg.register_example)
    rule = staticmethod(ordered_items)
    tokens_per_item = 3  # a digit and a space, plus slack


# name -> (class, description, params, default lengths)
DECODE_VARIANTS: dict[str, tuple[type[DecodeHeavyTask], str, dict[str, Any], list[int]]] = {
    "copy_list": (
        CopyTask,
        "copy: recall 24 two-digit numbers given before the filler, in order (scored per item)",
        {"items": 24},
        SHORT_LENGTHS,
    ),
    "copy_list_long": (
        CopyTask,
        "copy: recall 96 two-digit numbers in order (~300 generated tokens; scored per item)",
        {"items": 96},
        LONG_LENGTHS,
    ),
    "kv_recite": (
        ReciteTask,
        "recitation: the 3-digit values of 8 keys scattered in the filler, in a given order",
        {"items": 8},
        SHORT_LENGTHS,
    ),
    "kv_recite_long": (
        ReciteTask,
        "recitation: the values of 32 keys in a given order (~300 generated tokens)",
        {"items": 32},
        LONG_LENGTHS,
    ),
    "register": (
        RegisterTask,
        "state tracking: a digit register after each of 32 add/subtract steps scattered in the filler",
        {"items": 32},
        SHORT_LENGTHS,
    ),
    "register_short": (
        RegisterTask,
        "state tracking: the register after each of 12 add/subtract steps scattered in the filler",
        {"items": 12},
        SHORT_LENGTHS,
    ),
    "register_long": (
        RegisterTask,
        "state tracking: the register after each of 144 steps (~290 generated tokens)",
        {"items": 144},
        LONG_LENGTHS[1:],  # 144 step lines alone take ~2.1k tokens
    ),
}


def make_decode_task(name: str, **options: Any) -> DecodeHeavyTask:
    """A variant by name; options: num_docs, max_new_tokens, items (the item count)."""
    cls, description, params, lengths = DECODE_VARIANTS[name]
    return cls(name, description, dict(params), list(lengths), **options)
