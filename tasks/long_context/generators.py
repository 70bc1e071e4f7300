"""Plain generators for the long-context tasks, sized by a count of haystack units (no
tokenizer): passkey, RULER's needle-in-a-haystack family, variable tracking, common and
frequent words, and key-value retrieval.

Each function takes a `random.Random` and returns an `Example` (which also unpacks as
`prompt, answer = example`). The evaluation tasks wrap these with a length fitter
(`evalkit.tasks.long_context.fitting`) that picks the unit count for a target token length;
the reference-model training helper calls them directly.

Seeds. Evaluation draws every doc from `eval_rng(task, target_length, seed, index)` with
`0 <= seed < TRAIN_SEED_MIN` (default seed 42). Training must draw from
`training_rng(seed)` with `seed >= TRAIN_SEED_MIN` (1_000_000): the two use differently
prefixed string seeds, so their random streams never coincide.

The calls to the rng happen in a fixed order (answers and keys first, haystack last), so a
given rng state gives the same needles whatever the haystack size: the fitter can change
the size without changing the question.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import pi
from typing import Any

from evalkit.tasks.long_context import words
from evalkit.tasks.long_context.haystacks import NOISE

TRAIN_SEED_MIN = 1_000_000
EVAL_SEED_DEFAULT = 42


def eval_rng(task: str, target_length: int, seed: int, index: int) -> random.Random:
    """The rng of one evaluation doc: a function of (task, target length, seed, doc index)."""
    if not 0 <= seed < TRAIN_SEED_MIN:
        raise ValueError(f"evaluation seeds must be in [0, {TRAIN_SEED_MIN}); got {seed}")
    return random.Random(f"evalkit-eval:{task}:{target_length}:{seed}:{index}")


def training_rng(seed: int) -> random.Random:
    """The rng for one training example; seeds below TRAIN_SEED_MIN belong to evaluation."""
    if seed < TRAIN_SEED_MIN:
        raise ValueError(f"training seeds must be >= {TRAIN_SEED_MIN} (lower are evaluation's); got {seed}")
    return random.Random(f"evalkit-train:{seed}")


@dataclass
class Example:
    """One generated input.

    `text` is the question the user asks (haystack included); `gen_prefix` starts the answer
    (RULER's answer prefix; lm-eval puts it after `text` and a space, or as a prefilled
    assistant turn under a chat template). `answers` are the strings a correct response
    contains. `needles` are substrings of `text` whose token positions the task records.
    """

    text: str
    gen_prefix: str
    answers: list[str]
    needles: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        """Plain-text prompt, joined as lm-eval joins a doc and its gen_prefix."""
        if not self.gen_prefix:
            return self.text
        sep = "" if self.text[-1:].isspace() else " "
        return f"{self.text}{sep}{self.gen_prefix}"

    @property
    def answer(self) -> str:
        """A reference completion (training target): the answers joined by spaces."""
        return " ".join(self.answers)

    def __iter__(self) -> Iterator[str]:
        yield self.prompt
        yield self.answer


def _insert_at(units: list[str], items: Sequence[str], positions: Sequence[int]) -> list[str]:
    """`units` with items[i] inserted before units[positions[i]] (positions index `units`)."""
    out = list(units)
    for pos, item in sorted(zip(positions, items), key=lambda p: p[0], reverse=True):
        out.insert(pos, item)
    return out


# ---------------------------------------------------------------------------------------------
# passkey (landmark attention)

PASSKEY_INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there."
)
PASSKEY_QUESTION = "What is the pass key?"
PASSKEY_PREFIX = "The pass key is"


def passkey_example(rng: random.Random, n_filler_units: int, depth: float) -> Example:
    """Landmark-attention passkey: `n_filler_units` noise blocks with the info line after
    round(depth * n) of them (depth in [0, 1]); the key is a 5-digit number."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1]; got {depth}")
    key = str(rng.randint(10000, 99999))
    info = f"The pass key is {key}. Remember it. {key} is the pass key."
    before = round(depth * n_filler_units)
    parts = [
        PASSKEY_INTRO,
        " ".join([NOISE] * before),
        info,
        " ".join([NOISE] * (n_filler_units - before)),
        PASSKEY_QUESTION,
    ]
    text = "\n".join(p for p in parts if p)
    return Example(text, PASSKEY_PREFIX, [key], [info], {"depth": depth, "units": n_filler_units})


# ---------------------------------------------------------------------------------------------
# needle in a haystack (RULER)

NIAH_TEMPLATE = (
    "Some special magic {type_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_v} afterwards.\n{context}\n"
    "What are all the special magic {type_v} for {query} mentioned in the provided text?"
)
NIAH_TEMPLATE_ONE = (
    "A special magic {type_v} is hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_v} afterwards.\n{context}\n"
    "What is the special magic {type_v} for {query} mentioned in the provided text?"
)
NEEDLE = "One of the special magic {type_v} for {key} is: {value}."
RULER_DEPTHS = [round(i * 100 / 39) for i in range(40)]  # 40 evenly spaced depths in %, as RULER


def _draw(rng: random.Random, kind: str) -> str:
    if kind == "words":
        return words.word_key(rng)
    if kind == "numbers":
        return words.number_value(rng, 7)
    if kind == "uuids":
        return words.uuid_value(rng)
    raise ValueError(f"unknown needle type {kind!r}")


def niah_example(
    rng: random.Random,
    n_units: int,
    *,
    haystack: str = "noise",
    key_type: str = "words",
    value_type: str = "numbers",
    num_keys: int = 1,
    num_values: int = 1,
    num_queries: int = 1,
    sentences: Sequence[str] | None = None,
) -> Example:
    """RULER NIAH. `haystack`: "noise" (n lines of the grass-is-green block), "needle" (n
    distractor needles, one a line) or "essay" (n consecutive sentences of `sentences`, from a
    random start, with needles at RULER's depths at sentence boundaries)."""
    num_keys = max(num_keys, num_queries)
    keys: list[str] = []
    values: list[list[str]] = []
    needles: list[str] = []
    while len(keys) < num_keys:
        k = _draw(rng, key_type)
        if k in keys:
            continue
        keys.append(k)
        values.append([_draw(rng, value_type) for _ in range(num_values)])
        needles += [NEEDLE.format(type_v=value_type, key=k, value=v) for v in values[-1]]
    rng.shuffle(needles)
    query_idx = sorted(rng.sample(range(num_keys), num_queries))
    queries = [keys[i] for i in query_idx]
    answers = [v for i in query_idx for v in values[i]]
    n_units = max(n_units, 1)

    meta: dict[str, Any] = {"units": n_units, "haystack": haystack}
    if haystack == "essay":
        if not sentences:
            raise ValueError("the essay haystack needs `sentences`")
        start = rng.randrange(len(sentences))
        sents = [sentences[(start + i) % len(sentences)] for i in range(n_units)]
        depths = sorted(rng.sample(RULER_DEPTHS, len(needles)))
        positions = [int(len(sents) * d / 100) for d in depths]
        context = " ".join(_insert_at(sents, needles, positions))
        meta.update(depths=[d / 100 for d in depths], start_sentence=start)
    elif haystack in ("noise", "needle"):
        if haystack == "noise":
            lines = [NOISE] * n_units
        else:
            lines = []
            while len(lines) < n_units:
                k = _draw(rng, key_type)
                if k not in keys:  # a distractor must not answer the question
                    lines.append(NEEDLE.format(type_v=value_type, key=k, value=_draw(rng, value_type)))
        positions = (
            rng.sample(range(n_units + 1), len(needles))
            if n_units + 1 >= len(needles)
            else [rng.randrange(n_units + 1) for _ in needles]
        )
        context = "\n".join(_insert_at(lines, needles, positions))
        meta["depths"] = sorted(p / n_units for p in positions)
    else:
        raise ValueError(f"unknown haystack {haystack!r}")

    query = queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
    if num_queries * num_values == 1:
        text = NIAH_TEMPLATE_ONE.format(type_v=value_type[:-1], context=context, query=query)
        prefix = f"The special magic {value_type[:-1]} for {query} mentioned in the provided text is"
    else:
        text = NIAH_TEMPLATE.format(type_v=value_type, context=context, query=query)
        prefix = f"The special magic {value_type} for {query} mentioned in the provided text are"
    return Example(text, prefix, answers, needles, meta)


# ---------------------------------------------------------------------------------------------
# variable tracking (RULER vt)

VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {value} in the text above."
)
# "assgined" is RULER's spelling, kept so prompts match RULER's.
VT_PREFIX = (
    "Answer: According to the chain(s) of variable assignment in the text above, "
    "{n} variables are assgined the value {value}, they are:"
)


def _vt_chain(rng: random.Random, num_hops: int, name_len: int) -> tuple[list[str], list[str], str]:
    names: list[str] = []
    while len(names) < num_hops + 1:
        name = words.letters(rng, name_len, string.ascii_uppercase)
        if name not in names:
            names.append(name)
    value = str(rng.randint(10000, 99999))
    stmts = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]}" for j in range(num_hops)]
    return names, stmts, value


def _vt_context(rng: random.Random, n_noise: int, stmts: list[str]) -> str:
    n_noise = max(n_noise, 1)
    positions = sorted(rng.choices(range(n_noise + 1), k=len(stmts)))  # keeps the chain in order
    # stable order for equal positions: insert from the end, so earlier statements stay first
    out = list([NOISE] * n_noise)
    for i in reversed(range(len(stmts))):
        out.insert(positions[i], stmts[i])
    return "\n".join(out)


def vt_example(rng: random.Random, n_noise: int, *, num_hops: int = 4, icl_noise: int = 12) -> Example:
    """RULER variable tracking: a chain `VAR A = 12345`, `VAR B = VAR A`, ... (num_hops hops)
    spread through `n_noise` noise lines; one solved example (3-letter names, `icl_noise`
    lines) first. Answer: every variable holding the value."""
    names, stmts, value = _vt_chain(rng, num_hops, 5)
    icl_names, icl_stmts, icl_value = _vt_chain(rng, num_hops, 3)
    icl = (
        VT_TEMPLATE.format(context=_vt_context(rng, icl_noise, icl_stmts), value=icl_value)
        + " "
        + VT_PREFIX.format(n=num_hops + 1, value=icl_value)
        + " "
        + " ".join(icl_names)
    )
    text = icl + "\n\n" + VT_TEMPLATE.format(context=_vt_context(rng, n_noise, stmts), value=value)
    prefix = VT_PREFIX.format(n=num_hops + 1, value=value)
    return Example(text, prefix, names, stmts[:1], {"units": n_noise, "num_hops": num_hops})


# ---------------------------------------------------------------------------------------------
# common words extraction (RULER cwe)

CWE_TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\n"
    "Question: What are the 10 most common words in the above list?"
)
CWE_PREFIX = "Answer: The top 10 words that appear most often in the list are:"


def _cwe_list(rng: random.Random, pool: list[str], n_common: int, f_common: int, f_other: int) -> str:
    word_list = pool[:n_common] * f_common + pool[n_common:] * f_other
    rng.shuffle(word_list)
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(word_list))


def cwe_example(
    rng: random.Random,
    n_words: int,
    *,
    freq_common: int = 30,
    freq_other: int = 3,
    num_common: int = 10,
    example_words: int = 40,
    example_freqs: tuple[int, int] = (10, 3),
) -> Example:
    """RULER cwe: a numbered list of `n_words` distinct words where `num_common` appear
    `freq_common` times and the others `freq_other` times; one solved example first.
    RULER uses (30, 3) with a (40 words, 10, 3) example from 4k tokens up, (6, 1) with a
    (20, 3, 1) example below."""
    n_words = max(n_words, num_common)
    pool = words.distinct_words(rng, example_words + n_words)
    ex_pool, main_pool = pool[:example_words], pool[example_words:]
    ex_ctx = _cwe_list(rng, ex_pool, num_common, *example_freqs)
    ex_answer = " ".join(f"{i + 1}. {w}" for i, w in enumerate(ex_pool[:num_common]))
    example = CWE_TEMPLATE.format(context=ex_ctx) + " " + CWE_PREFIX + " " + ex_answer
    text = (
        example
        + "\n"
        + CWE_TEMPLATE.format(context=_cwe_list(rng, main_pool, num_common, freq_common, freq_other))
    )
    return Example(text, CWE_PREFIX, main_pool[:num_common], [], {"units": n_words})


# ---------------------------------------------------------------------------------------------
# frequent words extraction (RULER fwe)

FWE_TEMPLATE = (
    "Read the following coded text and track the frequency of each coded word. Find the three most "
    "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
    "the dots '....'. What are the three most frequently appeared words in the above coded text?"
)
FWE_PREFIX = "Answer: According to the coded text above, the three most frequently appeared words are:"


def fwe_example(
    rng: random.Random, n_words: int, *, vocab_size: int | None = None, alpha: float = 2.0, word_len: int = 6
) -> Example:
    """RULER fwe: coded words with Zipf counts n * k^-alpha / zeta(alpha); the top-ranked word is
    shown as "..." (to be ignored) and the answer is the next three. RULER's vocab size is
    target_length // 50 (the default here, without a target, is n_words // 18)."""
    vocab_size = max(8, vocab_size if vocab_size else n_words // 18)
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < vocab_size:
        w = words.letters(rng, word_len)
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    rng.shuffle(vocab)
    vocab[0] = "..."
    zeta = pi**2 / 6 if alpha == 2.0 else sum(k**-alpha for k in range(1, 100_000))
    counts = [int(n_words * (k**-alpha) / zeta) for k in range(1, vocab_size + 1)]
    if not counts[1] > counts[2] > counts[3] > counts[4]:
        raise ValueError(f"fwe needs more words to rank the top three apart (n_words={n_words})")
    coded = [w for w, c in zip(vocab, counts) for _ in range(c)]
    rng.shuffle(coded)
    text = FWE_TEMPLATE.format(context=" ".join(coded))
    return Example(text, FWE_PREFIX, vocab[1:4], [], {"units": n_words, "vocab_size": vocab_size})


# ---------------------------------------------------------------------------------------------
# key-value retrieval

KV_INTRO = (
    "Below is a list of key-value pairs. Memorize them: I will ask you for the value of one key afterwards."
)


def _kv_draw(rng: random.Random, kind: str) -> str:
    if kind == "word":
        return words.word_key(rng)
    if kind == "uuid":
        return words.uuid_value(rng)
    if kind == "letters":
        return words.letters(rng, 6)
    if kind == "number":
        return words.number_value(rng, 7)
    if kind == "short_number":
        return words.number_value(rng, 5)
    raise ValueError(f"unknown key/value kind {kind!r}")


def kv_example(
    rng: random.Random,
    n_pairs: int,
    *,
    key_kind: str = "word",
    value_kind: str = "number",
    depth: float | None = None,
) -> Example:
    """Key-value retrieval: `n_pairs` lines `key: value` with distinct keys, then the question
    for one key (at relative position `depth` in [0, 1], random if None). Kinds: "word"
    (adjective-noun), "letters" (6 random letters), "uuid", "number" (7 digits), "short_number"
    (5 digits). Harder with more pairs and with uuid keys/values."""
    n_pairs = max(n_pairs, 1)
    if key_kind == "word" and n_pairs > 50_000:
        raise ValueError("too many pairs for distinct word keys (max 50000); use key_kind='uuid'")
    target_idx = round(depth * (n_pairs - 1)) if depth is not None else rng.randrange(n_pairs)
    keys: list[str] = []
    seen: set[str] = set()
    while len(keys) < n_pairs:
        k = _kv_draw(rng, key_kind)
        if k not in seen:
            seen.add(k)
            keys.append(k)
    values = [_kv_draw(rng, value_kind) for _ in range(n_pairs)]
    key, value = keys[target_idx], values[target_idx]
    lines = [f"{k}: {v}" for k, v in zip(keys, values)]
    text = KV_INTRO + "\n" + "\n".join(lines) + f"\nWhat is the value of the key {key}?"
    meta = {"units": n_pairs, "depth": target_idx / max(n_pairs - 1, 1)}
    return Example(text, f"The value of the key {key} is", [value], [lines[target_idx]], meta)
