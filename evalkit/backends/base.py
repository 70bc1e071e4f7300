"""The contract between `evalkit run` and whatever generates text.

A backend receives a list of `GenRequest`s and reports each `GenResult` through a callback
as soon as it is done, so the runner can append it to the results store at once (a killed
run loses nothing completed). Results may arrive in any order; `index` says which request.

A backend that can take requests while it works (the local engine: `generate_stream`) may instead
be fed them as they are ready (a `RequestFeed`: long-context prompts still being built);
`generate_fed` hands any other backend the whole list once the feed is drained.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalkit.tasks.base import Prompt

# what a sampled run's manifest says of its randomness (`Backend.sampling_coupling`)
COUPLED = "coupled"
UNCOUPLED = "uncoupled — per-request seed sent, pairing is by question only"


@dataclass(frozen=True)
class RequestSampling:
    """A sampled request (temperature > 0): the seed keys the coupled randomness of this one
    generation (a question's sample j), the same in both arms; None on a request means greedy."""

    temperature: float
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k truncation
    seed: int = 0  # in [0, 2**63): every OpenAI-compatible server takes it


@dataclass
class GenRequest:
    prompt: Prompt
    max_new_tokens: int
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    min_tokens: int = 0
    gold: str | None = None  # a reference answer to score too (evalkit.backends.gold), or None
    # the token ids of a text `prompt` in the backend's own tokenizer (`TaskRequest.prompt_ids`), so
    # that a local engine need not tokenize it again; a server gets the text. None: not known
    prompt_ids: Any = field(default=None, repr=False)
    sampling: RequestSampling | None = None  # None: greedy


@dataclass
class GenResult:
    text: str
    n_prompt: int | None = None
    n_generated: int = 0
    finish_reason: str | None = None  # "stop" | "length" | "eos" | "error"
    flags: list[str] = field(default_factory=list)  # "nan", "inf", "overflow", "repetition"
    error: str | None = None  # set when the request failed for good; never scored
    timings: dict[str, float] = field(default_factory=dict)
    token_ids: list[int] | None = None  # the generated token ids, where the backend knows them
    gold: Any = None  # an evalkit.backends.gold.GoldScore when the request had a `gold`
    # the local engine's state health (`evalkit.store.headroom`): largest |state| per recurrent
    # layer over the request's life (None where not finite) and the most non-finite elements
    state_max_abs: list[float | None] | None = None
    state_nonfinite: int | None = None


OnResult = Callable[[int, GenResult], None]


class Backend(Protocol):
    name: str  # "local" | "openai"

    def describe(self) -> dict[str, Any]:
        """What defines this backend and arm, for the run manifest."""

    def generate(self, requests: list[GenRequest], on_result: OnResult) -> None:
        """Answer every request, calling on_result(index, result) once per request."""

    def close(self) -> None: ...


class RequestFeed(Protocol):
    """Requests that become ready over time, indexed 0, 1, 2, ... in the order they are handed out."""

    def take(self, block: bool) -> list[tuple[int, GenRequest]]:
        """The requests ready now and not yet taken, in index order; with `block`, wait for at least
        one, and [] then means none is left. A request that cannot be made raises here."""


class ListFeed:
    """A feed of requests all ready at once."""

    def __init__(self, requests: list[GenRequest]) -> None:
        self.left = list(enumerate(requests))

    def take(self, block: bool) -> list[tuple[int, GenRequest]]:
        got, self.left = self.left, []
        return got


def drain(feed: RequestFeed) -> list[GenRequest]:
    """Every request of `feed`, waiting for each, in index order."""
    out: list[tuple[int, GenRequest]] = []
    while got := feed.take(block=True):
        out.extend(got)
    assert [i for i, _ in out] == list(range(len(out))), "a feed hands out indices 0, 1, 2, ..."
    return [r for _, r in out]


def generate_fed(backend: Any, feed: RequestFeed, on_result: OnResult) -> None:
    """Answer every request of `feed`: streamed into a backend that takes requests as they come
    (`generate_stream`), else handed to `generate` once all are ready."""
    stream = getattr(backend, "generate_stream", None)
    if stream is not None:
        stream(feed, on_result)
    else:
        backend.generate(drain(feed), on_result)
