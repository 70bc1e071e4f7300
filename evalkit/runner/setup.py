"""From command-line choices to a backend, a tokenizer and the manifest's model/arm/backend.

Local arms are state dtypes (fp32|fp16|bf16) of the in-process engine; a remote arm is a free
label plus `--arm-note` (how the server was started), since evalkit cannot see inside it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import InputError

STATE_DTYPES = ("fp32", "fp16", "bf16")


@dataclass
class Setup:
    backend: Any
    tokenizer: Any
    model: dict[str, Any]
    arm: dict[str, Any]
    default_suite: Any = None  # the reference model's suite when no --model/--server is given
    after_generate: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def default_model() -> tuple[str, Any]:
    """The embedded reference model's path and its default suite (tasks, lengths, limit, seed).
    A missing model raises `ReferenceModelMissing`, whose message says what to do."""
    from evalkit import reference_model

    return str(reference_model.default_model_path()), reference_model.load_suite()


def load_tokenizer(name_or_path: str | None) -> Any:
    if not name_or_path:
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load the tokenizer from {name_or_path}: {exc}") from exc


def local_setup(
    model: str | None,
    arm: str,
    note: str | None,
    device: str | None,
    max_num_seqs: int | None,
    data_parallel: int | None = None,
) -> Setup:
    from evalkit.backends.data_parallel import DataParallelBackend, parse_devices
    from evalkit.backends.local import LocalBackend

    if arm not in STATE_DTYPES:
        raise InputError(
            f"--arm {arm!r}: a local run's arm is the state dtype, one of "
            f"{', '.join(STATE_DTYPES)} (free labels are for --server runs)"
        )
    suite = None
    if model is None:
        model, suite = default_model()
    devices = parse_devices(device, data_parallel)  # several: one engine process per device
    if devices:
        backend = DataParallelBackend(model, devices, state_dtype=arm, max_num_seqs=max_num_seqs)
    else:
        backend = LocalBackend(model, state_dtype=arm, device=device, max_num_seqs=max_num_seqs)
    desc = backend.describe()
    model_info = {"path": model, **desc.get("model", {})}
    arm_info = {
        "label": arm,
        "state_dtype": desc.get("state_dtype", arm),
        "note": note,
        "intra_chunk_dtype": desc.get("intra_chunk_dtype"),
        "kernel_build": desc.get("kernel_build"),
    }
    return Setup(backend, backend.tokenizer, model_info, arm_info, suite)


def remote_setup(
    servers: list[str],
    model: str | None,
    tokenizer: str | None,
    arm: str,
    note: str | None,
    concurrency: int,
    timeout: float,
    max_retries: int,
    seed: int | None,
) -> Setup:
    from evalkit.backends.openai_remote import OpenAIBackend

    backend = OpenAIBackend(
        servers,
        model=model,
        concurrency=concurrency,
        timeout=timeout,
        max_retries=max_retries,
        seed=1234 if seed is None else seed,
        api_key=os.environ.get("OPENAI_API_KEY"),
    )
    if backend.model_substituted:
        print(
            f"evalkit run: the server names its model {backend.model!r}; sending that for {model!r}",
            file=sys.stderr,
        )
    tok_source = tokenizer or (model if model and Path(model).is_dir() else None)
    tok = load_tokenizer(tok_source)
    model_info = {"path": model or backend.model, "id": backend.model, "tokenizer": tok_source}
    arm_info = {"label": arm, "state_dtype": arm if arm in STATE_DTYPES else None, "note": note}
    return Setup(
        backend, tok, model_info, arm_info, after_generate=lambda: {"backend_run": backend.run_info()}
    )


def base_manifest_fields(command: list[str]) -> dict[str, Any]:
    """The store's common manifest fields (version, commit, hardware, libraries, time)."""
    from evalkit.store import base_manifest

    return dict(base_manifest(command=command))
