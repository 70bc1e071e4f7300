"""The one byte-level BPE trainer of the small tokenizers evalkit builds itself: the reference
model's (`evalkit.refmodel.tokenizer`), the tiny test checkpoints' (`evalkit.testing.tiny_models`)
and the tests' tiny tokenizer (`evalkit.tasks.testing`)."""

from __future__ import annotations

from typing import Any


def train_byte_bpe(corpus: list[str], vocab_size: int, specials: list[str], split_digits: bool) -> Any:
    """A byte-level BPE `tokenizers.Tokenizer` trained on `corpus`, the specials first (ids 0..);
    `split_digits` puts every digit in its own token (numbers stay learnable)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok
