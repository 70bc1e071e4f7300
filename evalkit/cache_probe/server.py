"""The calls the probe makes: flushing a server's prefix cache where it offers that, and one greedy
completion with the generated tokens' log-probabilities."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from evalkit.backends.openai_remote import server_root
from evalkit.errors import EvalkitError

# endpoints that empty a server's prefix cache, in the order tried: vLLM (its dev-mode
# /reset_prefix_cache, VLLM_SERVER_DEV_MODE=1), SGLang (/flush_cache)
FLUSH_PATHS = ("/reset_prefix_cache", "/flush_cache")
UNIQUE_PREFIX = "unique-prefix"  # the cold method where no flush is offered


@dataclass(frozen=True)
class Reply:
    text: str
    tokens: tuple[str, ...] | None  # None: the server returned no log-probabilities
    logprobs: tuple[float, ...] | None


class ProbeServer:
    """One server: greedy completions through the openai client (its own retries of transient
    failures), the cache flushed through the first endpoint that answers 200."""

    def __init__(self, client: Any, base_url: str, model: str, *, headers: dict[str, str], seed: int | None):
        self.client = client
        self.root = server_root(base_url)
        self.model = model
        self.headers = headers
        self.seed = seed
        self.flush_path: str | None = None

    def find_flush(self) -> str | None:
        """The first flush endpoint that answers 200 (it empties the cache while asking), else None."""
        for path in FLUSH_PATHS:
            if self._post(path) == 200:
                self.flush_path = path
                return path
        return None

    def _post(self, path: str) -> int | None:
        try:
            return httpx.post(self.root + path, headers=self.headers, timeout=30.0).status_code
        except httpx.HTTPError:
            return None

    def flush(self) -> None:
        if self.flush_path is None:
            return
        status = self._post(self.flush_path)
        if status != 200:
            raise EvalkitError(f"{self.root}{self.flush_path} stopped flushing the cache (HTTP {status})")

    def complete(self, prompt: str, max_tokens: int) -> Reply:
        kw: dict[str, Any] = {"seed": self.seed} if self.seed is not None else {}
        r = self.client.completions.create(
            model=self.model, prompt=prompt, max_tokens=max_tokens, temperature=0.0, logprobs=1, **kw
        )
        choice = r.choices[0]
        lp = getattr(choice, "logprobs", None)
        if lp is None or lp.token_logprobs is None:
            return Reply(str(choice.text), None, None)
        return Reply(str(choice.text), tuple(lp.tokens or ()), tuple(float(x) for x in lp.token_logprobs))


def unique_prefix() -> str:
    """A prefix no earlier request began with: its prompt starts cold on any prefix cache."""
    return f"[{uuid.uuid4().hex}]\n"
