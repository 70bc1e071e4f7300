"""The local backend: the in-process engine, its state stored as the arm says (`evalkit.arm`).

Prompts become token ids through `evalkit.prompt_ids.encode_prompt` (the one definition, shared
with the engine and `evalkit serve`; imported here under its old name for the callers).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalkit.backends.base import GenRequest, GenResult, ListFeed, OnResult, Prompt, RequestFeed
from evalkit.errors import EvalkitError
from evalkit.prompt_ids import encode_prompt

if TYPE_CHECKING:
    from evalkit.engine import StepResult


def make_params(
    *, max_tokens: int, stop: list[str], ignore_eos: bool = False, min_tokens: int = 0, **sampling: Any
) -> Any:
    """Sampling parameters of the engine's own type: greedy unless `sampling` (the engine's
    `temperature`, `top_p`, `top_k`, `seed`, `sample_index`, `logprobs`, `prompt_logprobs`)
    says otherwise."""
    from evalkit.engine.sampling import SamplingParams

    return SamplingParams(
        max_new_tokens=max_tokens,
        stop=list(stop),
        ignore_eos=ignore_eos,
        min_tokens=min_tokens,
        **{"temperature": 0.0, **sampling},
    )


def sampling_fields(r: GenRequest) -> dict[str, Any]:
    """The engine's sampling fields of a request: none (greedy), or its temperature, truncation
    and seed (sample index 0: the seed already tells a question's samples apart)."""
    s = r.sampling
    if s is None:
        return {}
    return {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "seed": s.seed}


def to_result(out: Any) -> GenResult:
    timings = {k: float(v) for k, v in (getattr(out, "timings", None) or {}).items()}
    return GenResult(
        text=out.text,
        n_prompt=out.n_prompt,
        n_generated=out.n_generated,
        finish_reason=out.finish_reason,
        flags=list(out.flags or []),
        timings=timings,
        token_ids=[int(t) for t in out.token_ids],
        state_max_abs=finite_or_none(getattr(out, "state_layer_max_abs", None)),
        state_nonfinite=getattr(out, "state_nonfinite", None),
    )


def finite_or_none(values: list[float] | None) -> list[float | None] | None:
    """JSON-safe per-layer maxima: a non-finite one becomes None (`state_nonfinite` counts them)."""
    if values is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in values]


class LocalBackend:
    name = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        arm: Any = None,
        kernels: Any = None,
        state_dtype: str | None = None,
        device: str | None = None,
        max_num_seqs: int | None = None,
        engine: Any = None,
        prefill_budget: int | None = None,
        encode_cache: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        """`arm`: an `evalkit.arm.Arm` or its text (`state_dtype` is the same, kept for old
        callers); it sets the state format, the prefill chunk size and the intra-chunk dtype.
        `kernels`: an `evalkit.kernel_choice.KernelChoice` or its text (default: every default).

        `prefill_budget`: tokens per prefill forward (rows every prefill is padded to). Arms
        compared with each other must share it, or their GEMMs differ in shape as well as their
        stores; default: the engine's on the GPU (16,384), on the CPU `DEFAULT_PREFILL_CHUNK`,
        raised to the arm's chunk size when that is larger (the sweep passes one for all arms).
        `encode_cache`: text prompt -> token ids, shared by backends that ask the same questions
        (a 128k-token prompt takes a good part of a second to tokenize)."""
        from evalkit.arm import DEFAULT_PREFILL_CHUNK, parse_arm
        from evalkit.kernel_choice import parse_kernels

        self.arm = parse_arm(arm or state_dtype or "fp32")
        self.kernels = parse_kernels(kernels)
        if engine is None:
            import torch

            from evalkit.engine import EngineConfig, LLMEngine

            on_cpu = (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu"
            if prefill_budget is None and on_cpu:
                prefill_budget = max(DEFAULT_PREFILL_CHUNK, self.arm.prefill_chunk_size)
            config = EngineConfig(
                model=model,
                arm=self.arm,
                kernels=self.kernels,
                device=device or None,
                max_num_seqs=max_num_seqs or None,
                max_num_batched_tokens=prefill_budget,
                trust_remote_code=trust_remote_code,
            )
            engine = LLMEngine(config=config)
        self.engine = engine
        self.kernels = getattr(getattr(engine, "config", None), "kernels", self.kernels)
        self.tokenizer = engine.tokenizer
        self.encode_cache = encode_cache
        # called after every engine step (progress in tokens while nothing has finished yet)
        self.step_observer: Callable[[StepResult], None] | None = None

    def _encode(self, prompt: Prompt, ids: Any = None) -> Any:
        """The prompt's token ids: the ones the request carries (`GenRequest.prompt_ids`), the
        shared cache's, or encoded here."""
        if ids is not None and isinstance(prompt, str):
            return ids
        if self.encode_cache is None or not isinstance(prompt, str):
            return encode_prompt(self.tokenizer, prompt)
        ids = self.encode_cache.get(prompt)
        if ids is None:
            ids = self.encode_cache[prompt] = array("l", encode_prompt(self.tokenizer, prompt))
        return ids

    @property
    def max_model_len(self) -> int | None:
        config = getattr(self.engine, "config", None)
        return getattr(config, "max_model_len", None)

    def describe(self) -> dict[str, Any]:
        return {**self.engine.describe(), "name": self.name}

    def generate(self, requests: list[GenRequest], on_result: OnResult) -> None:
        """All requests join the engine's continuous batch; each result is handed over the step it
        finishes. A request with a `gold` answer also teacher-forces it in decode mode from the
        post-prompt state (`LLMEngine.add_request(forced_answer=...)`: a copy of the state, no
        second prefill), and its result waits for both. Engine failures propagate: completed
        results are already stored, a re-run resumes."""
        self.generate_stream(ListFeed(requests), on_result)

    def generate_stream(self, feed: RequestFeed, on_result: OnResult) -> None:
        """`generate` for requests that become ready over time: before every engine step the ready
        ones join the batch (in index order), and only an idle engine waits for the next. The engine
        is batch-invariant, so when a request joins does not change its result."""
        from evalkit.backends import gold as gold_mod

        owner: dict[int, tuple[int, str]] = {}  # engine request id -> (request index, "gen" | "gold")
        partial: dict[int, dict[str, Any]] = {}
        while True:
            busy = bool(owner) and self.engine.has_unfinished()
            got = feed.take(block=not busy)
            for i, r in got:
                self._add(i, r, owner, partial)
            if not busy and not got:  # nothing running and nothing left to feed
                break
            step = self.engine.step()
            if self.step_observer is not None:
                self.step_observer(step)
            for out in step.outputs:
                i, kind = owner.pop(out.request_id, (None, None))
                if i is None:
                    continue
                partial[i][kind] = to_result(out) if kind == "gen" else gold_mod.from_forced(out.forced)
                if len(partial[i]) == 2:
                    got_i = partial.pop(i)
                    result = got_i["gen"]
                    result.gold = got_i["gold"]
                    on_result(i, result)
        if owner:
            raise RuntimeError(f"the engine stopped with {len(owner)} requests unanswered")

    def _add(
        self, i: int, r: GenRequest, owner: dict[int, tuple[int, str]], partial: dict[int, dict[str, Any]]
    ) -> None:
        """Request `i` into the engine (and its forced answer, when it has a `gold`)."""
        from evalkit.backends import gold as gold_mod

        params = make_params(
            max_tokens=r.max_new_tokens,
            stop=r.stop,
            ignore_eos=r.ignore_eos,
            min_tokens=r.min_tokens,
            **sampling_fields(r),
        )
        ids = self._encode(r.prompt, r.prompt_ids)
        partial[i] = {}
        answer = None
        if r.gold is not None:
            answer = list(self.tokenizer.encode(r.gold, add_special_tokens=False)) or None
            if answer is None:
                partial[i]["gold"] = gold_mod.failed("decode", "the reference answer has no tokens")
        else:
            partial[i]["gold"] = None
        try:
            rid = self.engine.add_request(ids, params, forced_answer=answer)
        except EvalkitError as exc:  # e.g. prompt + answer longer than the cache: no measure
            if answer is None:
                raise
            partial[i]["gold"] = gold_mod.failed("decode", str(exc))
            rid = self.engine.add_request(ids, params)
        owner[rid] = (i, "gen")
        if answer is not None and "gold" not in partial[i]:
            owner[self.engine.forced_request_id(rid)] = (i, "gold")

    def close(self) -> None:
        pass
