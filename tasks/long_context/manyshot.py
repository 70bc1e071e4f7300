"""`gsm8k_manyshot`: a GSM8K test question after as many solved train examples as fill the
target length (the recurrent state accumulates over a long prompt, then the model reasons
briefly). Format and scoring are lm-eval's gsm8k (`Question: ...\\nAnswer: ...` shots joined
by a blank line; strict-match and flexible-extract exact_match, scored by lm-eval's code);
under a chat template the shots are user/assistant turns, as lm-eval's multi-turn few-shot.

Shots are drawn from one random permutation of the train split per doc (the same for every
target length, so a longer prompt mostly extends a shorter one), skipping shots that would
overflow so the prompt lands within 2% under the target. Per-shot token costs are counted
once per tokenizer; every final length is an exact count.
"""

from __future__ import annotations

import random
import weakref
from typing import Any

from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest
from evalkit.tasks.data import load_rows
from evalkit.tasks.gsm8k import GSM8KTask
from evalkit.tasks.long_context.base import (
    DEFAULT_LENGTHS,
    TOLERANCE,
    SizedTask,
    progress,
    render,
    resolve_seed,
)
from evalkit.tasks.long_context.fitting import LengthError
from evalkit.tasks.long_context.generators import Example, eval_rng
from evalkit.tasks.tokenizer import TokenizerView

_COSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shot_text(row: dict[str, str]) -> tuple[str, str]:
    return f"Question: {row['question']}\nAnswer:", row["answer"]


def manyshot_example(shots: list[dict[str, str]], test: dict[str, str], chat: bool) -> Example:
    """The prompt for `test` after `shots`, as lm-eval's gsm8k would build it for that many
    shots (plain text, or multi-turn chat turns in meta["turns"])."""
    q = f"Question: {test['question']}\nAnswer:"
    if chat:
        turns = []
        for row in shots:
            user, answer = shot_text(row)
            turns += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        return Example(q, "", [], [q], {"turns": turns, "n_shots": len(shots)})
    text = "".join(f"{u} {a}\n\n" for u, a in map(shot_text, shots)) + q
    return Example(text, "", [], [q], {"n_shots": len(shots)})


class ManyShotTask(SizedTask):
    name = "gsm8k_manyshot"
    description = (
        "GSM8K test question after N solved train examples, N filling the target length "
        "(lm-eval gsm8k format and scoring)"
    )
    metrics = GSM8KTask.metrics
    default_lengths = DEFAULT_LENGTHS
    max_new_tokens = 256
    until = ["Question:", "</s>", "<|im_end|>"]
    num_docs = 200
    params: dict[str, Any] = {}

    def __init__(self, **options: Any):
        super().__init__(**options)
        self._gsm8k = GSM8KTask("gsm8k")

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "format": "lm-eval gsm8k (Question/Answer, full solutions)",
            "scoring": self._gsm8k.config()["lm_eval_yaml"]["filter_list"],
        }

    def shot_costs(self, view: TokenizerView, train: tuple[dict[str, str], ...]) -> list[int]:
        """Tokens each train shot adds (plain form; chat overhead is calibrated per doc), counted
        once per tokenizer object."""
        try:
            per_tok = _COSTS.setdefault(view.tokenizer, {})
        except TypeError:  # not weak-referenceable: no cache
            per_tok = {}
        if len(train) not in per_tok:
            texts = [f"{u} {a}\n\n" for u, a in map(shot_text, train)]
            per_tok[len(train)] = view.count_many(texts, chat=True)  # chat=True: no BOS, counted once
        return per_tok[len(train)]

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
        view = TokenizerView(tokenizer)
        train, test = load_rows("train", data_dir), load_rows("test", data_dir)
        lengths = list(lengths or self.default_lengths)
        n_docs = min(self.num_docs if limit is None else int(limit), len(test))
        seed = resolve_seed(seed)
        costs = self.shot_costs(view, train)
        out = []
        with progress(len(lengths) * n_docs, self.name, show_progress) as bar:
            for target in lengths:
                for i in range(n_docs):
                    order = list(range(len(train)))
                    eval_rng(self.name, 0, seed, i).shuffle(order)  # same pool order at every length
                    ex, evals = self.fill(view, train, test[i], order, costs, target, apply_chat_template)
                    req = self.to_request(ex, view, target, seed, i, apply_chat_template, evals)
                    req.docs = [DocRef(doc_id=i, target=test[i]["answer"], meta={"doc": dict(test[i])})]
                    out.append(req)
                    bar.update(1)
        return out

    def fill(
        self,
        view: TokenizerView,
        train,
        test_row,
        order: list[int],
        costs: list[int],
        target: int,
        chat: bool,
    ) -> tuple[Example, int]:
        floor = int((1 - TOLERANCE) * target) + 1

        def build(ids: list[int]) -> Example:
            ex = manyshot_example([train[j] for j in ids], test_row, chat)
            ex.meta["shot_ids"] = ids
            return ex

        def count(ids: list[int]) -> int:
            return view.count(render(build(ids), view, chat), chat=chat)

        base = count([])
        if base > target:
            raise LengthError(f"{self.name}: the question is {base} tokens; target {target} is too small")
        overhead = 0.0  # tokens per shot beyond its own cost (chat turns, boundary merges)
        aim = target - max(1, int(0.25 * TOLERANCE * target))

        def select(overhead: float) -> tuple[list[int], float]:
            ids, est = [], float(base)
            for j in order:
                c = costs[j] + overhead
                if est + c <= aim:
                    ids.append(j)
                    est += c
                    if est > aim - 30:
                        break
            return ids, est

        best: list[int] = []
        best_len = base
        evaluations = 1
        ids: list[int] = []
        for _ in range(8):
            ids, est = select(overhead)
            exact = count(ids)
            evaluations += 1
            if best_len < exact <= target:
                best, best_len = ids, exact
            if best_len >= floor:
                break
            if ids:  # calibrate the per-shot overhead on this exact count
                overhead += (exact - est) / len(ids)
        if best_len < floor and best:  # top up: one more shot that fits the exact remaining gap
            chosen = set(best)
            tries = 0
            for j in order:
                if j not in chosen and costs[j] + overhead <= target - best_len:
                    cand = best + [j]
                    exact = count(cand)
                    evaluations += 1
                    tries += 1
                    if best_len < exact <= target:
                        best, best_len = cand, exact
                        if best_len >= floor:
                            break
                    if tries >= 8:
                        break
        if best_len < floor and ids:  # never over the target: drop the last shots until it fits
            while ids and count(ids) > target:
                ids = ids[:-1]
                evaluations += 1
            if count(ids) > best_len:
                best = ids
        return build(best), evaluations

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        doc = request.docs[0]
        return [self._gsm8k.score_doc(doc.doc_id, doc.meta["doc"], response)]

    def example(self, rng: random.Random, n_units: int, target: int, index: int, ctx: Any) -> Example:
        raise NotImplementedError("gsm8k_manyshot fills by shot costs, not by a unit count")
