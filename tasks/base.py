"""The contract every task implements.

A task turns its data into `TaskRequest`s (one prompt each) and scores a response into one
`ScoredDoc` per question the prompt contains: usually one, but K for `gsm8k_longdecode`,
whose K answers are paired separately. Each scored doc becomes one line of `samples.jsonl`,
keyed by (task, doc_id, length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Union

# A prompt is plain text, pre-tokenized ids, or chat messages ([{"role": ..., "content": ...}]).
# Tasks make prompts and backends consume them; it lives here, below both.
Prompt = Union[str, list[int], list[dict[str, str]]]


@dataclass
class DocRef:
    doc_id: int | str
    target: str
    meta: dict[str, Any] = field(default_factory=dict)
    # the reference completion as the model should continue the prompt (e.g. " 71432" after
    # "The pass key is"), teacher-forced for the paired log-probability measure; None: none
    gold: str | None = None


@dataclass
class TaskRequest:
    task: str
    prompt: Prompt  # text, or chat messages when the chat template is applied by the server
    max_new_tokens: int
    until: list[str]
    docs: list[DocRef]  # the questions this prompt asks (>= 1)
    length: int | None = None  # context tokens in the evaluated model's tokenizer (long-context tasks)
    meta: dict[str, Any] = field(default_factory=dict)  # needle position, depth, seed, ...
    # the token ids of a text `prompt` as a local engine encodes it (special tokens included), when
    # the task tokenized it anyway (sized tasks measure every prompt): a 128k-token prompt is not
    # tokenized a second time. Valid only for the tokenizer the task was built with; None: unknown
    prompt_ids: Any = field(default=None, repr=False)


@dataclass
class ScoredDoc:
    doc_id: int | str
    target: str
    correct: dict[str, bool]  # metric-or-filter name -> right/wrong
    extracted: dict[str, str] = field(default_factory=dict)  # filter name -> filtered answer
    score: dict[str, float] = field(default_factory=dict)  # fractional scores (string_match_all)
    item_correct: list[bool] | None = None  # per answer item, in answer order (decode-heavy tasks)


class Task(Protocol):
    name: str
    description: str
    metrics: list[str]
    default_lengths: list[int] | None

    def config(self) -> dict[str, Any]:
        """Everything that defines the questions and scoring (JSON-able; hashed into the manifest)."""

    def requests(
        self,
        *,
        tokenizer: Any,
        lengths: list[int] | None,
        limit: int | None,
        seed: int | None,
        data_dir: str | None,
        apply_chat_template: bool,
        show_progress: bool = True,
    ) -> list[TaskRequest]:
        """`show_progress`: a bar while documents are built (the runner turns it off, with the
        libraries' own bars, off a terminal or with --no-progress)."""
        ...

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]: ...
