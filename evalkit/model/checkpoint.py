"""Finding a checkpoint and reading its files: config.json, memory-mapped safetensors (single file or
sharded with `model.safetensors.index.json`) and the tokenizer.

A model is a local directory or a Hugging Face hub id ("org/name"); hub ids are fetched with
`huggingface_hub.snapshot_download` (only config, safetensors and tokenizer files)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from evalkit.errors import InputError
from evalkit.store.jsonl import MALFORMED_JSON, json_error_message
from evalkit.user_files import regular_file

from .families import Arch, parse_any_config

_HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.py", "*.tiktoken", "*.jinja"]


def resolve_model_path(model: str | os.PathLike) -> Path:
    """A local checkpoint directory for `model` (a path, or a hub id downloaded on demand)."""
    path = Path(model).expanduser()
    path = path.resolve() if path.exists() else path
    if path.exists():
        if not path.is_dir():
            raise InputError(f"model path {path} is a file; give the checkpoint directory")
        if not (path / "config.json").is_file():
            raise InputError(f"model directory {path} has no config.json (not a Hugging Face checkpoint)")
        return path
    text = str(model)
    looks_like_hub_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if not looks_like_hub_id:
        raise InputError(f"model path {text} does not exist")
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(repo_id=text, allow_patterns=_HUB_PATTERNS)
    except Exception as exc:  # network, auth, missing repo: one line for the user
        raise InputError(
            f"model {text!r} is neither a local directory nor a downloadable hub id: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    return resolve_model_path(local)


def read_config(path: Path) -> tuple[dict[str, Any], Arch]:
    """The raw config dict and the parsed architecture (refuses unsupported model types)."""
    try:
        raw = json.loads(regular_file(path / "config.json").read_text())
    except MALFORMED_JSON as exc:
        raise InputError(f"{path / 'config.json'} is not valid JSON: {json_error_message(exc)}") from None
    return raw, parse_any_config(raw, source=str(path / "config.json"))


def safetensors_files(path: Path) -> list[Path]:
    """The weight shards of a checkpoint, from the index file when there is one."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({path / f for f in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise InputError(
                f"{path}: shards listed in model.safetensors.index.json are missing: {missing[:3]}"
            )
        return files
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise InputError(f"{path} has no *.safetensors weights (pytorch .bin checkpoints are not supported)")
    return files


def weights_fingerprint(path: Path, block: int = 1 << 16, samples: int = 16) -> str:
    """A cheap fingerprint of a checkpoint's weights: sha256 over each shard's name, size and
    `samples` blocks spread over the file (first and last included), so two checkpoints of the
    same config (e.g. a retrained model) are told apart in a run's identity without reading a
    100 GB model. Not a full hash: a change confined to unsampled bytes goes unnoticed."""
    import hashlib

    h = hashlib.sha256()
    for f in safetensors_files(path):
        size = f.stat().st_size
        h.update(f"{f.name}:{size};".encode())
        with open(f, "rb") as fh:
            for i in range(samples):
                fh.seek(max(0, (size - block) * i // max(samples - 1, 1)))
                h.update(fh.read(block))
    return h.hexdigest()


class TensorSource:
    """Memory-mapped access to every tensor of a checkpoint by name (tensors are read on `get`)."""

    def __init__(self, path: Path):
        from safetensors import safe_open

        self._stack = ExitStack()
        self._where: dict[str, Any] = {}
        for f in safetensors_files(path):
            handle = self._stack.enter_context(safe_open(str(f), framework="pt", device="cpu"))
            for name in handle.keys():
                self._where[name] = handle

    def names(self) -> list[str]:
        return list(self._where)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def get(self, name: str) -> torch.Tensor:
        try:
            return self._where[name].get_tensor(name)
        except KeyError:
            raise InputError(f"checkpoint has no tensor {name!r}") from None

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name in self._where:
            yield name, self.get(name)

    def close(self) -> None:
        self._stack.close()


def load_tokenizer(path: Path, trust_remote_code: bool = False):
    """The checkpoint's tokenizer: a plain `tokenizers` model straight from its tokenizer.json
    (`JsonTokenizer`, the same ids without transformers' import), else transformers'
    AutoTokenizer. Code the checkpoint ships (Kimi's own tiktoken tokenizer) runs only with
    `trust_remote_code` (`--trust-remote-code`): without it such a checkpoint is refused."""
    from evalkit.json_tokenizer import JsonTokenizer

    try:
        plain = JsonTokenizer.from_folder(path)
    except Exception as exc:  # noqa: BLE001 -- tokenizers raises bare Exceptions on a bad file
        raise InputError(f"cannot load the tokenizer of {path}: {type(exc).__name__}: {exc}") from None
    if plain is not None:
        return plain
    from transformers import AutoTokenizer

    cfg = path / "tokenizer_config.json"
    needs_remote = any(path.glob("tokenization_*.py"))
    if cfg.is_file():
        try:
            needs_remote = needs_remote or "auto_map" in json.loads(cfg.read_text())
        except json.JSONDecodeError:
            pass
    if needs_remote and not trust_remote_code:
        raise InputError(
            f"the tokenizer of {path} ships its own Python code (tokenization_*.py or an auto_map); "
            "pass --trust-remote-code to run it (lm-eval: --trust_remote_code)"
        )
    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=needs_remote and trust_remote_code)
    except Exception as exc:
        raise InputError(f"cannot load the tokenizer of {path}: {type(exc).__name__}: {exc}") from None
