"""Stop strings checked only after a token that can end one (`engine/stops.py`) stop every stream
at the token where decoding the tail after every token stops it, on three kinds of tokenizer: the
reference model's byte-level BPE, a Metaspace BPE (a word's space is in its token's text only in
context) and a WordPiece (spaces between words and cleaned around punctuation)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from evalkit.engine.stops import StopStrings
from evalkit.json_tokenizer import JsonTokenizer

ROOT = Path(__file__).resolve().parent.parent
PIECES = [
    "Question", ":", " ", "\n", "\n\n", "Q", "A:", "<<", ">>", "=", "48/2", "24", "é", "日本", "The",
    " answer", " is", "x", "Q:", "</s>", "<|im_end|>", ".", ",", "'s", "n't", " :", "?",
]  # fmt: skip
STOP_SETS = [
    ["Question:", "</s>", "<|im_end|>"],  # lm-eval's gsm8k
    ["Q:", "</s>", "<|im_end|>", "\n\n"],  # gsm8k_cot
    [">>"],
    [":"],
    ["is 24"],
    ["日本"],  # a non-ASCII last character: every token checked
    ["answer "],  # a space: every token checked
]


def _texts(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(5, 40))) for _ in range(n)]


class _Plain:
    """A `tokenizers.Tokenizer` behind the engine's decode(ids, skip_special_tokens=...) call."""

    def __init__(self, tok: Tokenizer):
        self.tok = tok

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=skip_special_tokens)


def _trained(kind: str) -> _Plain:
    corpus = _texts(random.Random(1), 400)
    if kind == "metaspace":
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Metaspace(prepend_scheme="first")
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "</s>"])
    else:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(cleanup=True)
        trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "</s>"])
    tok.train_from_iterator(corpus, trainer)
    return _Plain(tok)


def _tokenizer(kind: str):
    if kind == "byte-level":
        return JsonTokenizer.from_folder(ROOT / "models" / "reference-model-v1")
    return _trained(kind)


def _reference_stop(tok, ids: list[int], stops: list[str], min_tokens: int) -> int | None:
    """The token count at which decoding the tail after every token (from min_tokens on) first
    holds a stop string: the engine's check before it filtered tokens."""
    longest = max(len(s) for s in stops)
    for n in range(max(min_tokens, 1), len(ids) + 1):
        tail = tok.decode(ids[max(0, n - longest - 4) : n], skip_special_tokens=True)
        if any(s in tail for s in stops):
            return n
    return None


def _filtered_stop(checker: StopStrings, ids: list[int], stops: list[str], min_tokens: int) -> int | None:
    """The same with `StopStrings.completed` called as the engine calls it (prompt tokens before)."""
    prompt = [ids[0]] * 3
    for n in range(max(min_tokens, 1), len(ids) + 1):
        tokens = prompt + ids[:n]
        if checker.completed(tokens, n, stops, n - 1 >= max(min_tokens, 1)):
            return n
    return None


@pytest.mark.parametrize("kind", ["byte-level", "metaspace", "wordpiece"])
def test_filtered_checks_stop_where_a_check_after_every_token_stops(kind):
    tok = _tokenizer(kind)
    rng = random.Random(7)
    streams = [tok.encode(t) for t in _texts(rng, 120)]
    vocab = max(max(s) for s in streams if s) + 1
    streams += [[rng.randrange(vocab) for _ in range(60)] for _ in range(40)]  # any ids, broken characters
    checker = StopStrings(tok)
    checks = stopped = 0
    for stops in STOP_SETS:
        for min_tokens in (0, 3):
            for ids in streams:
                if not ids:
                    continue
                want = _reference_stop(tok, ids, stops, min_tokens)
                assert _filtered_stop(checker, ids, stops, min_tokens) == want, (kind, stops, min_tokens, ids)
                checks += (want or len(ids)) - max(min_tokens, 1) + 1
                stopped += want is not None
    assert stopped > 100  # the streams do reach stop strings
    assert checker.tails_decoded < 0.8 * checks  # and most tokens are passed without a decode


def test_stop_sets_that_every_token_can_end_are_not_filtered():
    tok = _tokenizer("byte-level")
    ids = tok.encode("The answer is 24 and then some more words")
    for stops in (["answer "], ["日本"], ["a\ufffdb"]):
        checker = StopStrings(tok)
        for n in range(1, len(ids) + 1):
            checker.completed(ids[:n], n, stops, n > 1)
        assert checker.tails_decoded == len(ids), stops
