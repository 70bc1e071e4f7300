"""The reference model's tokenizer: byte-level BPE (`evalkit.tasks.bpe`, the one trainer) with
digits split one per token, a BOS on plain text and a ChatML template."""

from __future__ import annotations

from typing import Any

from evalkit.refmodel.settings import Settings
from evalkit.tasks.bpe import train_byte_bpe

SPECIALS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]  # ids 0..4
PAD, BOS, EOS, IM_START, IM_END = SPECIALS
CHATML = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


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
