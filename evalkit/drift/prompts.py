"""The N independent prompts a drift study reads, each with what made it (task, doc index, seed).

Between-prompt confidence intervals need prompts that are independent draws: doc i of a
long-context task at the requested length (its generator seeded by (task, length, seed, i)),
uniform random ids with seed `seed + i` (random-weight models), or GSM8K train text starting at
a different item per prompt. All prompts are cut to the shortest one's length, so every prompt
fills the same position buckets and a bucket's across-prompt CI is over the same positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import InputError

from .inputs import gsm8k_text, random_ids
from .task_text import plain_task_requests, plain_text, scalar_meta

GSM8K_STRIDE = 37  # items between the first items of consecutive GSM8K-text prompts


@dataclass
class Prompt:
    ids: list[int]
    info: dict[str, Any] = field(default_factory=dict)  # source, task, doc index, seed: recorded per prompt


def common_length(prompts: list[Prompt]) -> list[Prompt]:
    """Cut every prompt to the shortest one's length (recorded as `cut_from` where it cut)."""
    if not prompts:
        raise InputError("a drift study needs at least one prompt")
    n = min(len(p.ids) for p in prompts)
    if n < 2:
        raise InputError("a prompt has fewer than 2 tokens")
    out = []
    for p in prompts:
        info = dict(p.info)
        if len(p.ids) > n:
            info["cut_from"] = len(p.ids)
        out.append(Prompt(p.ids[:n], info))
    return out


def task_prompts(
    name: str,
    tokenizer,
    tokenize,
    length: int,
    n: int,
    seed: int,
    data_dir: str | None = None,
    show_progress: bool = True,
) -> list[Prompt]:
    """Docs 0..n-1 of a long-context task built for `length` tokens (each within 2% below it)."""
    reqs = plain_task_requests(name, tokenizer, length, n, seed, data_dir, show_progress)
    if len(reqs) < n:
        raise InputError(
            f"task {name} built {len(reqs)} prompts for length {length}, fewer than --prompts {n}"
        )
    out = []
    for i, req in enumerate(reqs[:n]):
        text = plain_text(name, req.prompt)
        info = {
            "source": f"task {name} doc {i} (target {length}, seed {seed})",
            "task": name,
            "doc_index": i,
            "doc_id": req.docs[0].doc_id if req.docs else i,
            "seed": seed,
            "task_meta": scalar_meta(req.meta),
        }
        out.append(Prompt(tokenize(text)[:length], info))
    return out


def random_prompts(vocab_size: int, length: int, n: int, seed: int) -> list[Prompt]:
    out = []
    for i in range(n):
        ids, info = random_ids(vocab_size, length, seed + i)
        out.append(Prompt(ids, {**info, "seed": seed + i, "doc_index": i}))
    return out


def gsm8k_prompts(tokenize, length: int, n: int, seed: int, data_dir: str | None = None) -> list[Prompt]:
    """GSM8K train text from item (seed + i * GSM8K_STRIDE) on, for prompt i."""
    out = []
    for i in range(n):
        start = seed + i * GSM8K_STRIDE
        ids, info = gsm8k_text(tokenize, length, data_dir, start=start)
        out.append(Prompt(ids, {**info, "first_item": start, "seed": seed, "doc_index": i}))
    return out
