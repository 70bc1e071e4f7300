"""Passkey, RULER's synthetic tasks and key-value retrieval as evalkit tasks: each pairs a
generator from `generators` with RULER's generation budget and the length fitter."""

from __future__ import annotations

import random
from typing import Any

from evalkit.tasks.long_context import generators as g
from evalkit.tasks.long_context.base import SizedTask
from evalkit.tasks.long_context.haystacks import essay_sentences

PASSKEY_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


class PasskeyTask(SizedTask):
    name = "passkey"
    description = (
        "landmark-attention passkey: a 5-digit key in the grass-is-green filler at depth "
        "0/25/50/75/100% (doc i at depth i mod 5)"
    )
    max_new_tokens = 16
    num_docs = 50
    n_min = 0
    params = {"depths": list(PASSKEY_DEPTHS)}

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        depths = self.params["depths"]
        return g.passkey_example(rng, n_units, float(depths[index % len(depths)]))


class NiahTask(SizedTask):
    """RULER NIAH; `params` are niah_example's keyword arguments."""

    max_new_tokens = 128

    def __init__(self, name: str, description: str, params: dict[str, Any], **options: Any):
        self.name, self.description, self.params = name, description, params
        super().__init__(**options)

    def context(self, data_dir: str | None) -> Any:
        return essay_sentences(data_dir) if self.params.get("haystack") == "essay" else None

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        return g.niah_example(rng, n_units, sentences=ctx, **self.params)


class VariableTrackingTask(SizedTask):
    name = "vt"
    description = "RULER variable tracking: find every variable of a 4-hop assignment chain hidden in noise"
    max_new_tokens = 30
    params = {"num_hops": 4, "icl_noise": 12}

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        return g.vt_example(rng, n_units, **self.params)


class CommonWordsTask(SizedTask):
    name = "cwe"
    description = (
        "RULER common words: the 10 words repeated most often in a long numbered list "
        "(30x vs 3x from 4k tokens, 6x vs 1x below)"
    )
    max_new_tokens = 120
    n_min = 10

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        if target >= 4096:
            return g.cwe_example(
                rng, n_units, freq_common=30, freq_other=3, example_words=40, example_freqs=(10, 3)
            )
        return g.cwe_example(
            rng, n_units, freq_common=6, freq_other=1, example_words=20, example_freqs=(3, 1)
        )


class FrequentWordsTask(SizedTask):
    name = "fwe"
    description = (
        "RULER frequent words: the 3 most frequent coded words in Zipf-distributed text "
        "(vocabulary target/50)"
    )
    max_new_tokens = 50
    n_min = 400
    params = {"alpha": 2.0}

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        return g.fwe_example(rng, n_units, vocab_size=max(8, target // 50), alpha=self.params["alpha"])


class KeyValueTask(SizedTask):
    max_new_tokens = 48

    def __init__(self, name: str, description: str, params: dict[str, Any], **options: Any):
        self.name, self.description, self.params = name, description, params
        super().__init__(**options)

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> g.Example:
        return g.kv_example(rng, n_units, **self.params)


# name -> (description, niah_example keyword arguments), as RULER's synthetic.yaml
NIAH_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "niah_single_1": (
        "NIAH: one 7-digit number for a word key in the noise haystack",
        {"haystack": "noise", "key_type": "words", "value_type": "numbers"},
    ),
    "niah_single_2": (
        "NIAH: one 7-digit number in GSM8K-text haystack (RULER: essays)",
        {"haystack": "essay", "key_type": "words", "value_type": "numbers"},
    ),
    "niah_single_3": (
        "NIAH: one UUID in GSM8K-text haystack",
        {"haystack": "essay", "key_type": "words", "value_type": "uuids"},
    ),
    "niah_multikey_1": (
        "NIAH: 4 keys (3 distractor needles) in GSM8K-text haystack",
        {"haystack": "essay", "key_type": "words", "value_type": "numbers", "num_keys": 4},
    ),
    "niah_multikey_2": (
        "NIAH: the haystack is thousands of distractor needles (word keys, numbers)",
        {"haystack": "needle", "key_type": "words", "value_type": "numbers"},
    ),
    "niah_multikey_3": (
        "NIAH: distractor-needle haystack with UUID keys and values",
        {"haystack": "needle", "key_type": "uuids", "value_type": "uuids"},
    ),
    "niah_multivalue": (
        "NIAH: 4 values for one key in GSM8K-text haystack (all 4 needed)",
        {"haystack": "essay", "key_type": "words", "value_type": "numbers", "num_values": 4},
    ),
    "niah_multiquery": (
        "NIAH: 4 keys asked at once in GSM8K-text haystack (all 4 needed)",
        {"haystack": "essay", "key_type": "words", "value_type": "numbers", "num_queries": 4},
    ),
}

KV_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "kv_retrieval": (
        "key-value retrieval: many `word-key: 7-digit value` lines, asked for one key",
        {"key_kind": "word", "value_kind": "number"},
    ),
    "kv_retrieval_uuid": (
        "key-value retrieval with UUID keys and values (harder)",
        {"key_kind": "uuid", "value_kind": "uuid"},
    ),
}
