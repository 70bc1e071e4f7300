"""A checkpoint's fast tokenizer read straight from its tokenizer.json, without importing transformers.

Why: importing transformers for `AutoTokenizer` was most of an `evalkit run`'s start-up after
torch (1.0-1.5 s on the CPU; on the H200 image it also pulled in scikit-learn and scanned every
installed distribution, several seconds a process). For a checkpoint whose tokenizer is a plain
`tokenizers` model (`tokenizer_class` TokenizersBackend or PreTrainedTokenizerFast) transformers'
fast tokenizer only forwards to that model, so reading tokenizer.json gives the same ids.

`from_folder` takes a folder only when every key of its tokenizer_config.json is one whose effect
is reproduced here (`_KNOWN_KEYS`), special tokens are plain strings and no code ships with it;
anything else returns None and the caller uses transformers. Chat templates are rendered by
transformers' own code, imported on first use, so a template renders exactly as before.
`EVALKIT_TOKENIZER=transformers` turns this path off (a before/after comparison, a fallback).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CLASSES = {"TokenizersBackend", "PreTrainedTokenizerFast"}
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")
# tokenizer_config.json keys whose effect this class reproduces (or that have none on encoding)
_KNOWN_KEYS = {"backend", "tokenizer_class", "extra_special_tokens", "model_max_length", *SPECIAL_KEYS}


class JsonTokenizer:
    """The subset of transformers' fast-tokenizer interface evalkit's local path uses."""

    is_fast = True

    def __init__(
        self, backend: Any, folder: Path, config: dict[str, Any], chat_template: str | None, name: str
    ):
        self.backend_tokenizer = backend
        self.name_or_path = name
        self.chat_template = chat_template
        self.special_tokens_map = {k: config[k] for k in SPECIAL_KEYS if config.get(k) is not None}
        self._folder = folder
        self._hf: Any = None  # transformers' tokenizer, loaded only to render a chat template
        for key in SPECIAL_KEYS:
            token = config.get(key)
            setattr(self, key, token)
            setattr(self, f"{key}_id", backend.token_to_id(token) if token is not None else None)

    @classmethod
    def from_folder(cls, folder: Path, name: str | None = None) -> JsonTokenizer | None:
        """The folder's tokenizer when it is a plain tokenizers model (see the module doc), else None.
        `name`: the folder as the user wrote it (transformers' `name_or_path`, which a fingerprint holds)."""
        if os.environ.get("EVALKIT_TOKENIZER", "").strip().lower() == "transformers":
            return None
        config = _plain_config(folder)
        if config is None:
            return None
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        named = [config[k] for k in SPECIAL_KEYS if config.get(k) is not None]
        special = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
        if not set(named + config.get("extra_special_tokens", [])) <= special:
            return None  # a token transformers would add or mark special itself
        return cls(backend, folder, config, _chat_template(folder, config), name or str(folder))

    # -- encoding --------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(
        self, text: str | list[str], add_special_tokens: bool = True, return_offsets_mapping: bool = False
    ) -> dict[str, Any]:
        """{"input_ids": ..., "offset_mapping": ...} as transformers' fast tokenizer returns them."""
        texts = [text] if isinstance(text, str) else list(text)
        encs = self.backend_tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
        out: dict[str, Any] = {"input_ids": [e.ids for e in encs]}
        if return_offsets_mapping:
            out["offset_mapping"] = [list(e.offsets) for e in encs]
        return {k: v[0] for k, v in out.items()} if isinstance(text, str) else out

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        ids = [ids] if isinstance(ids, int) else [int(t) for t in ids]
        return self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> Any:
        if isinstance(tokens, str):
            return self.backend_tokenizer.token_to_id(tokens)
        return [self.backend_tokenizer.token_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | list[int]) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    # -- chat --------------------------------------------------------------------------------------
    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        """transformers' own rendering (its Jinja environment and extensions), loaded on first use."""
        if self._hf is None:
            try:
                from transformers import AutoTokenizer
            except ModuleNotFoundError:
                from evalkit.errors import InputError
                from evalkit.extras import install_hint

                raise InputError(
                    "rendering the chat template needs transformers, which a light install lacks: "
                    f"{install_hint()} (or leave out --tokenizer: a chat server renders it)"
                ) from None
            self._hf = AutoTokenizer.from_pretrained(str(self._folder))
        return self._hf.apply_chat_template(messages, **kwargs)


def _plain_config(folder: Path) -> dict[str, Any] | None:
    """tokenizer_config.json when this class reproduces it exactly, else None."""
    cfg_path, tok_path = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if not (cfg_path.is_file() and tok_path.is_file()) or any(folder.glob("tokenization_*.py")):
        return None
    if (folder / "chat_template.json").exists() or (folder / "additional_chat_templates").exists():
        return None  # templates loaded by rules not reproduced here
    try:
        config = json.loads(cfg_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict) or config.get("tokenizer_class") not in CLASSES:
        return None
    if set(config) - _KNOWN_KEYS - {"chat_template"}:
        return None  # a key (added tokens, clean-up, add_bos_token, auto_map, ...) transformers acts on
    if any(config.get(k) is not None and not isinstance(config[k], str) for k in SPECIAL_KEYS):
        return None  # an AddedToken dict: its flags are transformers' to apply
    extra = config.get("extra_special_tokens", [])
    if not isinstance(extra, list) or not all(isinstance(t, str) for t in extra):
        return None
    return config


def _chat_template(folder: Path, config: dict[str, Any]) -> str | None:
    """The template transformers would load: chat_template.jinja, else the config's string."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    template = config.get("chat_template")
    return template if isinstance(template, str) else None
