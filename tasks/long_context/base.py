"""What every length-controlled task shares: rendering a generated example as the model will
see it (plain text, or the chat template with the answer prefix as a prefilled assistant
turn, the way lm-eval renders RULER), fitting it to each target length, recording the true
token length and needle positions, and building `TaskRequest`s with progress shown.

Length rule: `length` = tokens of the whole prompt as sent (chat template and answer prefix
included) is <= the target and >= 98% of it. Generation comes on top (unlike RULER, whose
prompt + tokens_to_generate <= target), so a "32k" doc prefills about 32k tokens.

Seeds: doc i at target L draws from `eval_rng(task, L, seed, i)`, seed default 42 and below
1_000_000 (training seeds start there; see `generators`).

Docs are built in worker processes and cached on disk (`parallel_build`, `prompt_cache`).
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest
from evalkit.tasks.long_context.fitting import Fit, LengthError, fit_units
from evalkit.tasks.long_context.generators import EVAL_SEED_DEFAULT, Example, eval_rng
from evalkit.tasks.long_context.parallel_build import SizedBuild, build_sized_requests
from evalkit.tasks.long_context.scoring import found
from evalkit.tasks.tokenizer import TOKENIZER_HINT, TokenizerView

# RULER reports 4k, 8k, 16k, 32k, 64k, 128k: 8k is where many models first slip
DEFAULT_LENGTHS = [4096, 8192, 16384, 32768, 65536, 131072]
TOLERANCE = 0.02
VERSION = 2  # 2: fitting calibrates on a 1/16 prompt and aims 1% under (other docs than 1)


def chat_messages(ex: Example) -> tuple[list[dict[str, str]], bool]:
    """The messages for `ex` and whether to add a generation prompt. A few-shot example may
    carry its earlier turns in meta["turns"]; the answer prefix becomes a final assistant turn
    that the model continues (lm-eval's gen_prefix handling)."""
    messages = list(ex.meta.get("turns", [])) + [{"role": "user", "content": ex.text}]
    if ex.gen_prefix:
        messages.append({"role": "assistant", "content": ex.gen_prefix})
    return messages, not ex.gen_prefix


def render(ex: Example, view: TokenizerView | None, chat: bool) -> str | list[dict[str, str]]:
    """The prompt as sent: plain text, the rendered chat template, or (chat without a local
    tokenizer) the messages for a server to template."""
    if not chat:
        if ex.meta.get("turns"):
            raise InputError("this example has chat turns; render it with a chat template")
        return ex.prompt
    messages, add_gen = chat_messages(ex)
    if view is None:
        return messages
    return view.render_chat(messages, add_generation_prompt=add_gen)


def progress(total: int, desc: str, show: bool = True):
    """The document-building bar (`show`: a task's `requests(show_progress=...)`)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="doc", leave=False, dynamic_ncols=True, disable=not show)


def resolve_seed(seed: int | None) -> int:
    return EVAL_SEED_DEFAULT if seed is None else int(seed)


class SizedTask:
    """A task whose docs are generated to fit target lengths. Subclasses set the class fields
    and implement `example(rng, n_units, target, index, ctx)`."""

    name: str = ""
    description: str = ""
    metrics: list[str] = ["string_match_all"]
    default_lengths: list[int] | None = DEFAULT_LENGTHS
    max_new_tokens: int = 128
    until: list[str] = []
    num_docs: int = 50
    n_min: int = 1
    params: dict[str, Any] = {}

    def __init__(self, *, num_docs: int | None = None, max_new_tokens: int | None = None, **params: Any):
        if num_docs is not None:
            self.num_docs = int(num_docs)
        if max_new_tokens is not None:
            self.max_new_tokens = int(max_new_tokens)
        unknown = set(params) - set(self.params)
        if unknown:
            raise InputError(
                f"task {self.name} has no option(s) {sorted(unknown)}; "
                f"options: num_docs, max_new_tokens, {', '.join(self.params) or '-'}"
            )
        self.params = {**self.params, **params}

    # -- contract ------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "version": VERSION,
            "family": "long_context",
            "params": self.params,
            "max_new_tokens": self.max_new_tokens,
            "until": list(self.until),
            "num_docs": self.num_docs,
            "metrics": self.metrics,
            "length_rule": f"prompt tokens <= target, >= {1 - TOLERANCE:.0%} of it",
        }

    def context(self, data_dir: str | None) -> Any:
        """Shared material for all docs (e.g. haystack sentences); None by default."""
        return None

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> Example:
        raise NotImplementedError

    def _build_inputs(self, lengths: list[int] | None, limit: int | None, data_dir: str | None):
        """(lengths, docs per length, shared context): what `requests` and `start_requests` build from."""
        n_docs = self.num_docs if limit is None else int(limit)
        return list(lengths or self.default_lengths or []), n_docs, self.context(data_dir)

    def requests(
        self,
        *,
        tokenizer: Any,
        lengths: list[int] | None = None,
        limit: int | None = None,
        seed: int | None = None,
        data_dir: str | None = None,
        apply_chat_template: bool = False,
        show_progress: bool = True,
    ) -> list[TaskRequest]:
        if tokenizer is None:
            raise InputError(
                f"{self.name} sizes prompts in the model's tokens: it needs that tokenizer; {TOKENIZER_HINT}"
            )
        lengths, n_docs, ctx = self._build_inputs(lengths, limit, data_dir)
        with progress(len(lengths) * n_docs, f"{self.name}", show_progress) as bar:
            return build_sized_requests(
                self,
                TokenizerView(tokenizer),
                lengths,
                n_docs,
                resolve_seed(seed),
                ctx,
                apply_chat_template,
                lambda: bar.update(1),
            )

    def start_requests(
        self,
        *,
        tokenizer: Any,
        lengths: list[int] | None = None,
        limit: int | None = None,
        seed: int | None = None,
        data_dir: str | None = None,
        apply_chat_template: bool = False,
    ) -> SizedBuild | None:
        """`requests()` as a build in progress, for a run that hands each doc to the engine as soon
        as it is built (`evalkit.runner.stream`): its `get(j)` equals `requests()[j]`. None where
        a subclass builds its requests its own way (its `requests()` is then the only way)."""
        if type(self).requests is not SizedTask.requests or tokenizer is None:
            return None
        lengths, n_docs, ctx = self._build_inputs(lengths, limit, data_dir)
        view = TokenizerView(tokenizer)
        return SizedBuild(
            self, view, lengths, n_docs, resolve_seed(seed), ctx, apply_chat_template, background=True
        )

    def outline(self, target: int, index: int) -> TaskRequest:
        """Doc `index` at `target` before it is built: its key (doc id, length) and token budget as
        `to_request` will give them, an empty prompt."""
        doc = DocRef(doc_id=index, target="")
        return TaskRequest(self.name, "", self.max_new_tokens, list(self.until), [doc], length=target)

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        doc = request.docs[0]
        refs = doc.meta["answers"]
        hits = found(response, refs)
        frac = len(hits) / len(refs)
        metric = self.metrics[0]
        return [
            ScoredDoc(
                doc.doc_id, doc.target, {metric: frac == 1.0}, {"found": ", ".join(hits)}, {metric: frac}
            )
        ]

    # -- building ------------------------------------------------------------------------------
    def fit(self, make: Callable[[int], Example], view: TokenizerView, target: int, chat: bool) -> Fit:
        return fit_units(
            lambda n: render(make(n), view, chat),
            lambda t: view.count(t, chat=chat),
            target,
            n_min=self.n_min,
            tol=TOLERANCE,
            what=f"{self.name} prompt",
        )

    def build_example(
        self, view: TokenizerView, target: int, seed: int, index: int, ctx: Any, chat: bool
    ) -> tuple[Example, Fit]:
        """Doc `index` at `target`, fitted; the example and the fit that sized it."""

        def make(n: int) -> Example:
            return self.example(eval_rng(self.name, target, seed, index), n, target, index, ctx)

        fit = self.fit(make, view, target, chat)
        return make(fit.n), fit

    def sized_request(
        self, view: TokenizerView, target: int, seed: int, index: int, ctx: Any, chat: bool
    ) -> TaskRequest:
        ex, fit = self.build_example(view, target, seed, index, ctx, chat)
        return self.to_request(ex, view, target, seed, index, chat, fit.evaluations)

    def lm_eval_rows(
        self,
        *,
        tokenizer: Any,
        lengths: list[int],
        limit: int | None = None,
        seed: int | None = None,
        data_dir: str | None = None,
        apply_chat_template: bool = False,
    ) -> list[dict[str, Any]]:
        """The docs as rows for an lm-eval dataset (RULER's fields: input, outputs, gen_prefix,
        length, max_length), fitted the way lm-eval will render them."""
        rows = []
        for req_ex in self._examples(tokenizer, lengths, limit, seed, data_dir, apply_chat_template):
            req, ex = req_ex
            rows.append(
                {
                    "index": req.meta["index"],
                    "input": ex.text,
                    "gen_prefix": ex.gen_prefix,
                    "outputs": list(ex.answers),
                    "length": req.meta["length"],
                    "max_length": req.length,
                    "needle_depths": req.meta["needle_depths"],
                    "seed": req.meta["seed"],
                }
            )
        return rows

    def _examples(
        self,
        tokenizer: Any,
        lengths: list[int],
        limit: int | None,
        seed: int | None,
        data_dir: str | None,
        chat: bool,
    ):
        view = TokenizerView(tokenizer)
        seed = resolve_seed(seed)
        ctx = self.context(data_dir)
        n_docs = self.num_docs if limit is None else int(limit)
        for target in lengths:
            for i in range(n_docs):
                ex, fit = self.build_example(view, target, seed, i, ctx, chat)
                yield self.to_request(ex, view, target, seed, i, chat, fit.evaluations), ex

    def to_request(
        self,
        ex: Example,
        view: TokenizerView,
        target: int | None,
        seed: int,
        index: int,
        chat: bool,
        evaluations: int = 0,
    ) -> TaskRequest:
        prompt = render(ex, view, chat)
        ids, positions = view.encode_measure(prompt, ex.needles, chat=chat)
        length = len(ids)
        if target is not None and length > target:
            raise LengthError(f"{self.name}: built {length} tokens for target {target}")
        meta = {k: v for k, v in ex.meta.items() if k != "turns"}
        meta.update(
            length=length,
            target_length=target,
            seed=seed,
            index=index,
            chat=chat,
            needle_positions=positions,
            needle_depths=[None if p is None else round(p / max(length, 1), 4) for p in positions],
            fill=None if target is None else round(length / target, 4),
            fit_evaluations=evaluations,
            max_seq_tokens=length + self.max_new_tokens,
        )
        doc = DocRef(
            doc_id=index,
            target=", ".join(ex.answers),
            meta={"answers": list(ex.answers)},
            gold=" " + ex.answer,  # as the reference model was trained: prompt + " " + answers
        )
        return TaskRequest(
            task=self.name,
            prompt=prompt,
            max_new_tokens=self.max_new_tokens,
            until=list(self.until),
            docs=[doc],
            length=target,
            meta=meta,
            # kept where they are what the engine will encode (plain text; a chat-rendered prompt is
            # counted without special tokens, but a local engine encodes its text with them)
            prompt_ids=None if chat else array("i", ids),
        )


__all__ = ["SizedTask", "render", "chat_messages", "DEFAULT_LENGTHS", "TOLERANCE", "LengthError"]
