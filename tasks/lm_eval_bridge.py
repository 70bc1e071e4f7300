"""evalkit's long-context tasks as lm-eval tasks.

    lm_eval --include_path "$(python -c 'import evalkit.tasks as t; print(t.lm_eval_dir())')" \\
        --tasks evalkit_passkey --model ... \\
        --metadata '{"tokenizer": "<hf name or path>", "max_seq_lengths": [4096, 16384]}'

Like lm-eval's RULER tasks, the YAMLs under `tasks/lm_eval/` call `custom_dataset` functions
here with lm-eval's metadata (merged with `--model_args`): the tokenizer comes from
`tokenizer`, `pretrained` or `model` (loaded with transformers' AutoTokenizer), lengths from
`max_seq_lengths` (default [4096]), `num_samples` (default: the task's), `seed` (default 42),
`data_dir` (GSM8K for the essay haystacks; default $EVALKIT_DATA then the hub) and
`apply_chat_template` (fit lengths to the chat-rendered prompt; default false, as RULER).
Docs are the same as `evalkit run` builds for that tokenizer (doc i at length L from the same
seed); lm-eval places `gen_prefix` after the input (or as a prefilled assistant turn).
The decode-heavy tasks (`_evalkit_items.yaml`) report `item_match_all` (all items right) and
`item_fraction` instead of `string_match_all`.
Metrics: `string_match_all` over all docs, and per length under the length's name (RULER's
convention: other lengths report -1, ignored by the aggregation).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from evalkit.tasks.long_context.scoring import postprocess, string_match_all

LENGTH_KEYS = [4096, 8192, 16384, 32768, 65536, 131072]
ITEM_LENGTH_KEYS = [1024, 2048, *LENGTH_KEYS]
TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")


@lru_cache(maxsize=4)
def _tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name, trust_remote_code=False)  # no code runs unasked


def _dataset(task_name: str, **kwargs: Any):
    import datasets

    from evalkit.tasks.registry import get_task

    name = next((kwargs[k] for k in TOKENIZER_KEYS if isinstance(kwargs.get(k), str) and kwargs[k]), None)
    if not name:
        raise ValueError(
            f"evalkit_{task_name} sizes its docs in the model's tokens; pass a tokenizer with "
            '--metadata \'{"tokenizer": "<name or path>"}\' or --model_args tokenizer=...'
        )
    task = get_task(task_name)
    lengths = [int(x) for x in kwargs.get("max_seq_lengths", [4096])]
    rows = task.lm_eval_rows(
        tokenizer=_tokenizer(name),
        lengths=lengths,
        limit=kwargs.get("num_samples"),
        seed=kwargs.get("seed"),
        data_dir=kwargs.get("data_dir"),
        apply_chat_template=bool(kwargs.get("apply_chat_template", False)),
    )
    return {"test": datasets.Dataset.from_list(rows, split=datasets.Split.TEST)}


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    score = string_match_all(postprocess(results[0]), list(doc["outputs"]))
    out = {str(n): -1.0 for n in LENGTH_KEYS}
    out["string_match_all"] = score
    if str(doc["max_length"]) in out:
        out[str(doc["max_length"])] = score
    return out


def process_item_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """The decode-heavy tasks: `item_match_all` = every item right (the exact-match bit),
    `item_fraction` = fraction of items right; per length, the exact-match bit."""
    from evalkit.tasks.long_context.itemwise import RULES

    flags = RULES[doc["item_rule"]](results[0], list(doc["outputs"]))
    exact = float(all(flags))
    out = {str(n): -1.0 for n in ITEM_LENGTH_KEYS}
    out.update(item_match_all=exact, item_fraction=sum(flags) / len(flags))
    if str(doc["max_length"]) in out:
        out[str(doc["max_length"])] = exact
    return out


def aggregate(values: list[float]) -> float:
    kept = [v for v in values if v != -1]
    return sum(kept) / len(kept) if kept else -1


def passkey(**kw):
    return _dataset("passkey", **kw)  # noqa: E704


def niah_single_1(**kw):
    return _dataset("niah_single_1", **kw)  # noqa: E704


def niah_single_2(**kw):
    return _dataset("niah_single_2", **kw)  # noqa: E704


def niah_single_3(**kw):
    return _dataset("niah_single_3", **kw)  # noqa: E704


def niah_multikey_1(**kw):
    return _dataset("niah_multikey_1", **kw)  # noqa: E704


def niah_multikey_2(**kw):
    return _dataset("niah_multikey_2", **kw)  # noqa: E704


def niah_multikey_3(**kw):
    return _dataset("niah_multikey_3", **kw)  # noqa: E704


def niah_multivalue(**kw):
    return _dataset("niah_multivalue", **kw)  # noqa: E704


def niah_multiquery(**kw):
    return _dataset("niah_multiquery", **kw)  # noqa: E704


def vt(**kw):
    return _dataset("vt", **kw)  # noqa: E704


def cwe(**kw):
    return _dataset("cwe", **kw)  # noqa: E704


def fwe(**kw):
    return _dataset("fwe", **kw)  # noqa: E704


def kv_retrieval(**kw):
    return _dataset("kv_retrieval", **kw)  # noqa: E704


def kv_retrieval_uuid(**kw):
    return _dataset("kv_retrieval_uuid", **kw)  # noqa: E704


def copy_list(**kw):
    return _dataset("copy_list", **kw)  # noqa: E704


def copy_list_long(**kw):
    return _dataset("copy_list_long", **kw)  # noqa: E704


def kv_recite(**kw):
    return _dataset("kv_recite", **kw)  # noqa: E704


def kv_recite_long(**kw):
    return _dataset("kv_recite_long", **kw)  # noqa: E704


def register(**kw):
    return _dataset("register", **kw)  # noqa: E704


def register_short(**kw):
    return _dataset("register_short", **kw)  # noqa: E704


def register_long(**kw):
    return _dataset("register_long", **kw)  # noqa: E704
