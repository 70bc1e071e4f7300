"""The fields of one `samples.jsonl` line, their validation, and the key samples pair on."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

REQUIRED_FIELDS = ("task", "doc_id", "prompt_hash", "target", "response", "correct", "error")
OPTIONAL_FIELDS = (
    "prompt",
    "length",
    "score",
    "extracted",
    "n_generated",
    "finish_reason",
    "flags",
    "timings",
    "state_max_abs",
    "state_nonfinite",
    "sample",
)


@dataclass
class Sample:
    """One samples.jsonl line as the runner writes it (`to_record()`: the JSON object, fields in
    this order). Readers get plain dicts checked by `normalise_sample`: older runs and other
    writers may carry fewer optional fields or more."""

    task: str
    doc_id: int | str
    length: int | None
    prompt_hash: str
    prompt: Any  # as lm-eval's --log_samples: discordant questions stay readable; None: not stored
    target: str
    response: str
    error: str | None  # set: the question failed for good and is not scored
    n_generated: int | None = None
    finish_reason: str | None = None
    flags: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    generated_ids: list[int] | None = None
    correct: dict[str, bool] = field(default_factory=dict)
    score: dict[str, float] = field(default_factory=dict)
    extracted: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # the `gold_*` fields, the request's `meta`
    item_correct: list[bool] | None = None  # per-item verdicts of a multi-item answer
    # the local engine's state health: per recurrent layer the largest |state| seen at the health
    # checks (null where not finite), and the most non-finite state elements seen at one check;
    # absent for backends that cannot see the state (servers)
    state_max_abs: list[float | None] | None = None
    state_nonfinite: int | None = None
    sample: int | None = None  # the sample index j of a sampled run (k per question); None: greedy

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "task": self.task,
            "doc_id": self.doc_id,
            "length": self.length,
            **({"sample": self.sample} if self.sample is not None else {}),
            "prompt_hash": self.prompt_hash,
            **({"prompt": self.prompt} if self.prompt is not None else {}),
            "target": self.target,
            "response": self.response,
            "correct": self.correct,
            "error": self.error,
            "score": self.score,
            "extracted": self.extracted,
            "n_generated": self.n_generated,
            "finish_reason": self.finish_reason,
            "flags": self.flags,
            "timings": self.timings,
            "generated_ids": self.generated_ids,
            **self.extra,
        }
        if self.item_correct is not None:
            record["item_correct"] = self.item_correct
        if self.state_max_abs is not None:
            record["state_max_abs"] = self.state_max_abs
            record["state_nonfinite"] = self.state_nonfinite
        return record


class SampleError(ValueError):
    """A sample line does not follow the store's schema (the message names the field)."""


def doc_sort_key(doc: str) -> tuple[int, int, str]:
    """Order doc ids numerically when they are ASCII integers ("-1", "12"), else as text after them."""
    body = doc[1:] if doc.startswith("-") else doc
    if body.isascii() and body.isdigit():
        return 0, int(doc), ""
    return 1, 0, doc


SampleKey = tuple  # (task, doc_id, length), or (task, doc_id, length, sample) in a sampled run


def question_key(task: str, doc_id: Any, length: int | None, sample: int | None = None) -> SampleKey:
    """(task, str(doc_id), length): the identity of one question (at one context length); the
    store pairs and resumes samples on it, the runner plans with it. A sampled run's sample j of
    the question adds j: (task, str(doc_id), length, j); greedy keys keep their three parts."""
    key = (str(task), str(doc_id), None if length is None else int(length))
    return key if sample is None else (*key, int(sample))


def sample_key(sample: dict[str, Any]) -> SampleKey:
    """The `question_key` of a stored sample."""
    return question_key(sample["task"], sample["doc_id"], sample.get("length"), sample.get("sample"))


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise SampleError(f"correct[{name!r}] must be true/false (or 0/1), got {value!r}")


def normalise_sample(sample: Any) -> dict[str, Any]:
    """Check a sample against the schema and return a copy with canonical types.

    `correct` values become bools, `length` is an int or None, `doc_id` stays int or str.
    Raises SampleError naming the first problem.
    """
    if not isinstance(sample, dict):
        raise SampleError(f"a sample is a JSON object, got {type(sample).__name__}")
    for name in REQUIRED_FIELDS:
        if name not in sample:
            raise SampleError(f"missing field {name!r}")
    out = dict(sample)
    if not isinstance(out["task"], str) or not out["task"]:
        raise SampleError(f"field 'task' must be a non-empty string, got {out['task']!r}")
    doc_id = out["doc_id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)) or doc_id == "":
        raise SampleError(f"field 'doc_id' must be an int or a non-empty string, got {doc_id!r:.80}")
    for name in ("prompt_hash", "target", "response"):
        if not isinstance(out[name], str):
            raise SampleError(f"field {name!r} must be a string, got {type(out[name]).__name__}")
    if out["error"] is not None and not isinstance(out["error"], str):
        raise SampleError(f"field 'error' must be null or a message, got {out['error']!r}")
    if not isinstance(out["correct"], dict):
        raise SampleError(f"field 'correct' must be an object {{metric: bool}}, got {out['correct']!r}")
    out["correct"] = {str(k): _as_bool(str(k), v) for k, v in out["correct"].items()}
    if out["error"] is None and not out["correct"]:
        raise SampleError("field 'correct' is empty on a sample without an error")
    length = out.get("length")
    if length is not None:
        if (
            isinstance(length, bool)
            or not isinstance(length, (int, float))
            or not math.isfinite(length)
            or length != int(length)
            or length <= 0
        ):
            raise SampleError(f"field 'length' must be a positive integer or null, got {length!r}")
        length = int(length)
    out["length"] = length
    j = out.get("sample")
    if j is not None and (isinstance(j, bool) or not isinstance(j, int) or j < 0):
        raise SampleError(f"field 'sample' must be a sample index >= 0 or absent, got {j!r}")
    score = out.get("score")
    if score is not None:
        if not isinstance(score, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in score.values()
        ):
            raise SampleError(f"field 'score' must be an object {{metric: number}}, got {score!r}")
    return out
