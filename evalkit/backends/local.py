"""The local backend: the in-process engine, with the recurrent state pool in the arm's dtype.

`encode_prompt` is the single definition of how a prompt becomes token ids; `evalkit serve`
uses it too, which is what makes a run through the server equal an in-process run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalkit.backends.base import GenRequest, GenResult, OnResult, Prompt


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Text as vLLM's /v1/completions tokenizes it (the tokenizer's special tokens included);
    chat messages through the chat template with a generation prompt, as /v1/chat/completions."""
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt))
    if prompt and isinstance(prompt[0], dict):
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        return list(tokenizer.encode(text, add_special_tokens=False))
    return [int(t) for t in prompt]


def make_params(
    engine: Any, *, max_tokens: int, stop: list[str], ignore_eos: bool = False, min_tokens: int = 0
) -> Any:
    """Greedy sampling parameters of the engine's own type."""
    from evalkit.engine.sampling import SamplingParams

    return SamplingParams(
        max_new_tokens=max_tokens,
        stop=list(stop),
        ignore_eos=ignore_eos,
        min_tokens=min_tokens,
        temperature=0.0,
    )


def to_result(out: Any) -> GenResult:
    timings = {k: float(v) for k, v in (getattr(out, "timings", None) or {}).items()}
    return GenResult(
        text=out.text,
        n_prompt=out.n_prompt,
        n_generated=out.n_generated,
        finish_reason=out.finish_reason,
        flags=list(out.flags or []),
        timings=timings,
    )


def engine_step(engine: Any) -> tuple[list[Any], int]:
    """One engine step: (outputs finished in it, sequences advanced if it was a decode step)."""
    res = engine.step()
    outputs, n = res if isinstance(res, tuple) else (res, 0)
    return list(outputs), (-n if n < 0 else 0)


class LocalBackend:
    name = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        state_dtype: str = "fp32",
        device: str | None = None,
        max_num_seqs: int | None = None,
        engine: Any = None,
    ) -> None:
        if engine is None:
            from evalkit.engine import LLMEngine

            kwargs: dict[str, Any] = {"state_dtype": state_dtype}
            if device:
                kwargs["device"] = device
            if max_num_seqs:
                kwargs["max_num_seqs"] = max_num_seqs
            engine = LLMEngine(model, **kwargs)
        self.engine = engine
        self.tokenizer = engine.tokenizer
        # called after every engine step with its n (prompt tokens prefilled, or -sequences decoded)
        self.step_observer: Callable[[int], None] | None = None

    def describe(self) -> dict[str, Any]:
        return {**self.engine.describe(), "name": self.name}

    def generate(self, requests: list[GenRequest], on_result: OnResult) -> None:
        """All requests join the engine's continuous batch; each result is handed over the step it
        finishes. Engine failures propagate: completed results are already stored, a re-run resumes."""
        index: dict[int, int] = {}
        for i, r in enumerate(requests):
            params = make_params(
                self.engine,
                max_tokens=r.max_new_tokens,
                stop=r.stop,
                ignore_eos=r.ignore_eos,
                min_tokens=r.min_tokens,
            )
            index[self.engine.add_request(encode_prompt(self.tokenizer, r.prompt), params)] = i
        while index and self.engine.has_unfinished():
            res = self.engine.step()
            outputs, n = res if isinstance(res, tuple) else (res, 0)
            if self.step_observer is not None:  # progress in tokens while nothing has finished yet
                self.step_observer(n)
            for out in outputs:
                i = index.pop(out.request_id, None)
                if i is not None:
                    on_result(i, to_result(out))
        if index:
            raise RuntimeError(f"the engine stopped with {len(index)} requests unanswered")

    def close(self) -> None:
        pass
