"""Every task evalkit knows, by name: `get_task(name, **options)`, `list_tasks()`, and
`parse_lengths("4k,16k,64k")`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import Task


@dataclass(frozen=True)
class TaskInfo:
    name: str
    description: str
    metrics: list[str]
    default_lengths: list[int] | None
    family: str  # "gsm8k" | "ruler" | "gsm8k_long" | "decode_heavy"
    max_new_tokens: int | None


def _gsm8k(name: str) -> Callable[..., Task]:
    def make(**options: Any) -> Task:
        from evalkit.tasks.gsm8k import GSM8KTask

        return GSM8KTask(name, **options)

    return make


def _cls(module: str, cls: str) -> Callable[..., Task]:
    def make(**options: Any) -> Task:
        import importlib

        return getattr(importlib.import_module(f"evalkit.tasks.long_context.{module}"), cls)(**options)

    return make


def _variant(cls: str, table: str, name: str) -> Callable[..., Task]:
    def make(**options: Any) -> Task:
        from evalkit.tasks.long_context import ruler

        description, params = getattr(ruler, table)[name]
        return getattr(ruler, cls)(name, description, dict(params), **options)

    return make


def _decode(name: str) -> Callable[..., Task]:
    def make(**options: Any) -> Task:
        from evalkit.tasks.long_context.decode_tasks import make_decode_task

        return make_decode_task(name, **options)

    return make


def _factories() -> dict[str, tuple[str, Callable[..., Task]]]:
    from evalkit.tasks.long_context.decode_tasks import DECODE_VARIANTS
    from evalkit.tasks.long_context.ruler import KV_VARIANTS, NIAH_VARIANTS

    out: dict[str, tuple[str, Callable[..., Task]]] = {
        "gsm8k": ("gsm8k", _gsm8k("gsm8k")),
        "gsm8k_cot": ("gsm8k", _gsm8k("gsm8k_cot")),
        "gsm8k_manyshot": ("gsm8k_long", _cls("manyshot", "ManyShotTask")),
        "gsm8k_longdecode": ("gsm8k_long", _cls("longdecode", "LongDecodeTask")),
        "passkey": ("ruler", _cls("ruler", "PasskeyTask")),
    }
    for name in NIAH_VARIANTS:
        out[name] = ("ruler", _variant("NiahTask", "NIAH_VARIANTS", name))
    out["vt"] = ("ruler", _cls("ruler", "VariableTrackingTask"))
    out["cwe"] = ("ruler", _cls("ruler", "CommonWordsTask"))
    out["fwe"] = ("ruler", _cls("ruler", "FrequentWordsTask"))
    for name in KV_VARIANTS:
        out[name] = ("ruler", _variant("KeyValueTask", "KV_VARIANTS", name))
    for name in DECODE_VARIANTS:
        out[name] = ("decode_heavy", _decode(name))
    return out


def task_names() -> list[str]:
    return list(_factories())


def get_task(name: str, **options: Any) -> Task:
    """A task by name; `options` are the task's own (e.g. num_docs, max_new_tokens, num_fewshot).
    A name evalkit does not define is looked up as an lm-eval task (`LmEvalTask`)."""
    factories = _factories()
    try:
        if name not in factories:  # any lm-eval generate_until task (include_path: its YAML folders)
            from evalkit.tasks.lm_eval_task import LmEvalTask

            return LmEvalTask(name, **options)
        return factories[name][1](**options)
    except (TypeError, ValueError) as exc:  # e.g. int("abc") inside the task
        raise InputError(f"bad option for task {name}: {exc}") from exc


def list_tasks() -> list[TaskInfo]:
    out = []
    for name, (family, make) in _factories().items():
        task = make()
        out.append(
            TaskInfo(
                name,
                task.description,
                list(task.metrics),
                list(task.default_lengths) if task.default_lengths else None,
                family,
                getattr(task, "max_new_tokens", None),
            )
        )
    return out


MAX_LENGTH = 1 << 24  # 16M tokens: far beyond any model's context
_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_lengths(text: str | list[int] | None) -> list[int] | None:
    """`"4k,16k,64k"` -> [4096, 16384, 65536]; k = 1024, m = 1024**2; plain numbers as is."""
    if text is None:
        return None
    if isinstance(text, list):
        return [int(x) for x in text]
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _LENGTH.match(part)
        if not m:
            raise InputError(f"bad length {part!r}: use numbers like 4096, 4k, 128k or 1m, comma-separated")
        value = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[m.group(2).lower()]
        if value != int(value) or value <= 0:
            raise InputError(f"bad length {part!r}: must be a positive whole number of tokens")
        if value > MAX_LENGTH:  # before any prompt is built: 99999999k would end in MemoryError
            raise InputError(f"bad length {part!r}: longer than any model evalkit runs ({MAX_LENGTH} tokens)")
        out.append(int(value))
    if not out:
        raise InputError("no lengths given")
    return out
