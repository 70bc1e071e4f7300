"""The base of the tests' scripted lm-eval models: generation only, one scripted answer a request."""

from __future__ import annotations

from typing import Any


def generation_only_lm() -> type:
    """An lm-eval `LM` subclass whose `generate_until` answers each request with `self.respond(request)`
    and which refuses log-likelihood requests (lm-eval is imported only when a test asks for it)."""
    from lm_eval.api.model import LM

    class GenerationOnly(LM):
        def respond(self, request: Any) -> str:
            raise NotImplementedError

        def generate_until(self, requests):
            return [self.respond(r) for r in requests]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    return GenerationOnly
