"""A small real tokenizer, for `evalkit tasks --show` without --tokenizer and for tests: a
byte-level BPE trained with `tokenizers` on a GSM8K slice (or on built-in text when GSM8K is
absent), wrapped as a transformers `PreTrainedTokenizerFast` that adds a BOS and has a ChatML
chat template. Built once per process and cached on disk (a few seconds the first time)."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from evalkit.tasks.bpe import train_byte_bpe

CHATML = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIALS = ["<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"]
_FALLBACK_TEXT = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
    "Question: A farmer has 12 cows and buys 7 more. How many cows does he have? Answer: 12 + 7 = 19. "
    "One of the special magic numbers for brave-otter is: 1234567. VAR ABCDE = VAR FGHIJ "
)


def _training_text(data_dir: str | None, rows: int) -> list[str]:
    try:
        from evalkit.tasks.data import load_rows

        data = load_rows("train", data_dir)[:rows]
        return [r["question"] + "\n" + r["answer"] for r in data] + [_FALLBACK_TEXT] * 20
    except Exception:  # noqa: BLE001 - no GSM8K: fall back to fixed text
        return [_FALLBACK_TEXT] * 200


@lru_cache(maxsize=4)
def tiny_tokenizer(vocab_size: int = 1024, data_dir: str | None = None, rows: int = 2000):
    """A `PreTrainedTokenizerFast` (byte-level BPE, BOS added, ChatML template)."""
    from tokenizers import Tokenizer, processors
    from transformers import PreTrainedTokenizerFast

    key = hashlib.sha256(f"v1:{vocab_size}:{rows}:{data_dir}".encode()).hexdigest()[:12]
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = cache_home / "evalkit" / f"tiny-bpe-{key}.json"
    if cache.is_file():
        tok = Tokenizer.from_file(str(cache))
    else:
        tok = train_byte_bpe(_training_text(data_dir, rows), vocab_size, SPECIALS, split_digits=False)
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tok.save(str(tmp))
        tmp.replace(cache)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    fast.chat_template = CHATML
    fast.name_or_path = f"evalkit-tiny-bpe-{vocab_size}"
    return fast
