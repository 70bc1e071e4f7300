"""The byte-level BPE tokenizers evalkit trains: one trainer (`train_byte_bpe`) serves the
reference model (digits split one per token, ChatML) and the tiny test checkpoints."""

from __future__ import annotations

from typing import Any

from evalkit.refmodel.settings import Settings

SPECIALS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]  # ids 0..4
PAD, BOS, EOS, IM_START, IM_END = SPECIALS
CHATML = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


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


def train_tokenizer(s: Settings, corpus: list[str]) -> tuple[Any, Any]:
    """The reference model's tokenizer (raw and as transformers' fast tokenizer): digits split one
    per token, a BOS added to plain text, and a ChatML template that writes its own BOS."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = train_byte_bpe(corpus, s.vocab_size, SPECIALS, split_digits=True)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    for i, name in enumerate(SPECIALS):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[IM_START, IM_END],
        model_max_length=1 << 24,
    )
    fast.chat_template = CHATML
    return tok, fast
