"""From command-line choices to a backend, a tokenizer and the manifest's model/arm/backend.

A local arm is an `evalkit.arm.Arm` (state format, prefill chunk size, intra-chunk dtype) of the
in-process engine; a remote arm is a free label plus `--arm-note` (how the server was started),
since evalkit cannot see inside it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError


@dataclass
class Setup:
    backend: Any
    tokenizer: Any
    model: dict[str, Any]
    arm: dict[str, Any]
    default_suite: Any = None  # the reference model's suite when no --model/--server is given
    after_generate: Any = None
    kernels: dict[str, Any] | None = None  # the manifest's `kernels` (local runs: the KernelChoice)


def default_model() -> tuple[str, Any]:
    """The embedded reference model's path and its default suite (tasks, lengths, limit, seed).
    A missing model raises `ReferenceModelMissing`, whose message says what to do."""
    from evalkit import reference_model

    return str(reference_model.default_model_path()), reference_model.load_suite()


def load_tokenizer(name_or_path: str | None, trust_remote_code: bool = False) -> Any:
    """A --server run's tokenizer; its own code (if it ships some) runs only with --trust-remote-code.
    A local folder with a plain tokenizer.json is read without importing transformers (`JsonTokenizer`)."""
    if not name_or_path:
        return None
    if Path(name_or_path).expanduser().is_dir():
        from evalkit.json_tokenizer import JsonTokenizer

        try:
            plain = JsonTokenizer.from_folder(Path(name_or_path).expanduser(), name_or_path)
        except Exception as exc:  # noqa: BLE001 -- tokenizers raises bare Exceptions on a bad file
            raise InputError(f"cannot load the tokenizer from {name_or_path}: {exc}") from None
        if plain is not None:
            return plain
    try:
        from transformers import AutoTokenizer
    except ModuleNotFoundError:  # a light install: the `tokenizers` library alone
        from evalkit.tasks.tokenizer import load_bare_tokenizer

        return load_bare_tokenizer(name_or_path)
    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        if not trust_remote_code and "trust_remote_code" in str(exc):
            raise InputError(
                f"the tokenizer {name_or_path} ships its own Python code; pass --trust-remote-code to run it"
            ) from None
        raise InputError(f"cannot load the tokenizer from {name_or_path}: {exc}") from exc


def parse_local_arm(text: str) -> Any:
    """The `--arm` of a local run as an `Arm`; a one-line error that says the syntax otherwise."""
    from evalkit.arm import parse_arm

    try:
        return parse_arm(text)
    except InputError as exc:
        raise InputError(f"--arm: {exc} (free labels are for --server runs)") from None


def local_arm_info(backend: Any, note: str | None) -> dict[str, Any]:
    """The manifest's `arm` record of a local run: the arm, plus the kernels that ran it."""
    desc = backend.describe()
    return {**backend.arm.describe(), "note": note, "kernel_build": desc.get("kernel_build")}


def check_device(device: str | None) -> None:
    """`--device`: cpu, cuda or cuda:N, and a CUDA device must exist (a one-line error, not a
    traceback from deep inside torch)."""
    if device is None:
        return
    m = re.fullmatch(r"(cpu|cuda)(?::(\d+))?", device.strip())
    if m is None or (m.group(1) == "cpu" and m.group(2)):
        raise InputError(f"--device {device!r}: use cpu, cuda or cuda:N")
    if m.group(1) == "cuda":
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise InputError(f"--device {device}: no CUDA GPU is visible to this process (use --device cpu)")
        if m.group(2) is not None and int(m.group(2)) >= n:
            raise InputError(f"--device {device}: only {n} CUDA device(s) visible (cuda:0..cuda:{n - 1})")


def max_model_len(backend: Any) -> int | None:
    """The longest prompt + generation the backend's model takes, when it says (else None)."""
    value = getattr(backend, "max_model_len", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check_lengths(lengths: list[int] | None, backend: Any) -> None:
    """Refuse context lengths the model cannot take before any prompt is built."""
    limit = max_model_len(backend)
    too_long = [n for n in lengths or [] if limit is not None and n >= limit]
    if too_long:
        raise InputError(
            f"--lengths {max(too_long)} does not fit the model's max length {limit} tokens "
            "(prompt plus the answer)"
        )


def local_setup(
    model: str | None,
    arm: Any,
    note: str | None,
    device: str | None,
    max_num_seqs: int | None,
    loaded: Any = None,
    prefill_budget: int | None = None,
    encode_cache: dict[str, Any] | None = None,
    trust_remote_code: bool = False,
    data_parallel: int | str | None = None,
    kernels: Any = None,
) -> Setup:
    """`loaded`: the already loaded `model` (a `LoadedModel`: the sweep loads it once for all arms);
    `prefill_budget`: rows per prefill forward, shared by arms compared together (LocalBackend);
    `kernels`: the `KernelChoice` (or its text) every arm runs with;
    several devices (`device` "cuda:0,cuda:1" or `data_parallel` N or "auto"): one engine process each."""
    from evalkit.backends.data_parallel import DataParallelBackend, parse_devices
    from evalkit.backends.local import LocalBackend

    arm = parse_local_arm(arm) if isinstance(arm, str) else arm
    suite = None
    if model is None:
        model, suite = default_model()
    devices = parse_devices(device, data_parallel)  # several: one engine process per device
    for d in devices or [device]:
        check_device(d)
    if devices:
        backend = DataParallelBackend(
            model,
            devices,
            arm=arm,
            kernels=kernels,
            max_num_seqs=max_num_seqs,
            trust_remote_code=trust_remote_code,
        )
    else:
        backend = LocalBackend(
            loaded or model,
            arm=arm,
            kernels=kernels,
            device=device,
            max_num_seqs=max_num_seqs,
            prefill_budget=prefill_budget,
            encode_cache=encode_cache,
            trust_remote_code=trust_remote_code,
        )
    arm_info = local_arm_info(backend, note)
    model_info = {
        "path": model,
        **backend.describe().get("model", {}),
        "trust_remote_code": trust_remote_code,
        "declared_state": declared_state_note(model, arm_info.get("state_dtype")),
    }
    kernels_record = backend.describe().get("kernels")
    return Setup(backend, backend.tokenizer, model_info, arm_info, suite, kernels=kernels_record)


def declared_state_note(model: Any, arm_state_dtype: str | None) -> dict[str, Any] | None:
    """The checkpoint's declared state dtype beside the arm's (model.declared_state in the
    manifest); a note on stderr when they differ."""
    from evalkit.declared_state import arm_note, read_declared_state

    note = arm_note(read_declared_state(model) if isinstance(model, (str, Path)) else None, arm_state_dtype)
    if note and note["arm_differs"]:
        print(
            f"evalkit run: note: the checkpoint declares {note['key']}={note['value']}; "
            f"this arm stores the state as {arm_state_dtype}",
            file=sys.stderr,
        )
    return note


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
    trust_remote_code: bool = False,
    api_key: str | None = None,
    request_order: str = "given",
) -> Setup:
    from evalkit.backends.openai_remote import OpenAIBackend
    from evalkit.backends.server_config import differs_from_arm

    backend = OpenAIBackend(
        servers,
        model=model,
        concurrency=concurrency,
        request_order=request_order,
        timeout=timeout,
        max_retries=max_retries,
        seed=1234 if seed is None else seed,
        api_key=api_key or os.environ.get("OPENAI_API_KEY"),
    )
    if backend.model_substituted:
        print(
            f"evalkit run: the server names its model {backend.model!r}; sending that for {model!r}",
            file=sys.stderr,
        )
    tok_source = tokenizer or (model if model and Path(model).is_dir() else None)
    tok = load_tokenizer(tok_source, trust_remote_code)
    model_info = {
        "path": model or backend.model,
        "id": backend.model,
        "tokenizer": tok_source,
        "trust_remote_code": trust_remote_code,
    }
    from evalkit.arm import SERVER_FORMATS

    arm_info = {"label": arm, "state_dtype": arm if arm in SERVER_FORMATS else None, "note": note}
    if model and Path(model).is_dir():
        model_info["declared_state"] = declared_state_note(model, arm_info["state_dtype"])
    if arm_info["state_dtype"]:
        for url, config in backend.describe()["server_config"].items():
            said = differs_from_arm(config, arm_info["state_dtype"])
            if said:
                print(f"evalkit run: note: {url}: {said}", file=sys.stderr)
    return Setup(
        backend, tok, model_info, arm_info, after_generate=lambda: {"backend_run": backend.run_info()}
    )


def base_manifest_fields(command: list[str]) -> dict[str, Any]:
    """The store's common manifest fields (version, commit, hardware, libraries, time)."""
    from evalkit.store import base_manifest

    return dict(base_manifest(command=command))
