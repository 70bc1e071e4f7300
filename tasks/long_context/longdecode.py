"""`gsm8k_longdecode` (LongGenBench-style): K GSM8K test questions in one prompt, answered in
one long response, so the recurrent state is rounded on every one of thousands of generated
tokens. Each answer is cut out of the response at its `Answer i:` marker and scored on its
own with lm-eval's gsm8k_cot filters and exact_match (strict: "The answer is N."; flexible:
the last number), so one request yields K paired docs with their own doc ids (the test
indices). The length axis of this task is K (questions per prompt), not tokens.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest
from evalkit.tasks.data import load_rows
from evalkit.tasks.long_context.base import SizedTask, progress, render, resolve_seed
from evalkit.tasks.long_context.generators import Example
from evalkit.tasks.tokenizer import TokenizerView

DEFAULT_K = [10, 25, 50]
MAX_K = 200
TOKENS_PER_ANSWER = 256

# Two of the standard chain-of-thought exemplars (Wei et al. 2022), showing the answer format.
DEMO = [
    (
        "There are 15 trees in the grove. Grove workers will plant trees in the grove today. "
        "After they are done, there will be 21 trees. How many trees did the grove workers plant today?",
        "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must "
        "have been 21 - 15 = 6. The answer is 6.",
    ),
    (
        "If there are 3 cars in the parking lot and 2 more cars arrive, "
        "how many cars are in the parking lot?",
        "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5.",
    ),
]
INSTRUCTION = (
    "Answer each of the following {k} math questions, in order, in one response. Begin the answer to "
    'question i with "Answer i:" on a new line, reason step by step, and end it with "The answer is N." '
    "where N is the final number. Do not repeat the questions. Answer all {k} questions."
)
STRICT = r"The answer is (\-?[0-9\.\,]+)."  # gsm8k_cot strict-match
FLEXIBLE = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"  # gsm8k flexible-extract (last match)
REGEXES_TO_IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]
_MARKER = re.compile(r"(?im)^[ \t*#]*Answer[ _]?(\d+)\s*[:.]")


def longdecode_example(questions: list[str]) -> Example:
    k = len(questions)
    demo_q = "\n".join(f"Question {i + 1}: {q}" for i, (q, _) in enumerate(DEMO))
    demo_a = "\n".join(f"Answer {i + 1}: {a}" for i, (_, a) in enumerate(DEMO))
    qs = "\n".join(f"Question {i + 1}: {q}" for i, q in enumerate(questions))
    text = (
        INSTRUCTION.format(k=k)
        + f"\n\nExample with {len(DEMO)} questions:\n{demo_q}\n{demo_a}\n\n"
        + f"Now the {k} questions:\n{qs}\n"
    )
    return Example(text, "Answer 1:", [], [], {"k": k})


def split_answers(text: str, k: int) -> dict[int, str]:
    """Answer i's text: from its first `Answer i:` marker to the next marker (any number)."""
    marks = [(int(m.group(1)), m.start(), m.end()) for m in _MARKER.finditer(text)]
    out: dict[int, str] = {}
    for n, (i, _, end) in enumerate(marks):
        stop = marks[n + 1][1] if n + 1 < len(marks) else len(text)
        if 1 <= i <= k and i not in out:
            out[i] = text[end:stop].strip()
    return out


@lru_cache(maxsize=1)
def _filters():
    from lm_eval.filters.extraction import RegexFilter

    return {
        "strict-match": RegexFilter(regex_pattern=STRICT),
        "flexible-extract": RegexFilter(regex_pattern=FLEXIBLE, group_select=-1),
    }


def score_answer(segment: str | None, gold: str) -> tuple[dict[str, bool], dict[str, str]]:
    """lm-eval's regex filters and exact_match (gsm8k settings) on one answer segment."""
    from lm_eval.api.metrics import exact_match_hf_evaluate

    correct, extracted = {}, {}
    for name, filt in _filters().items():
        pred = "[invalid]" if segment is None else list(filt.apply([[segment]], [{}]))[0][0]
        em = exact_match_hf_evaluate(
            predictions=[pred],
            references=[gold],
            regexes_to_ignore=REGEXES_TO_IGNORE,
            ignore_case=True,
            ignore_punctuation=False,
        )["exact_match"]
        correct[f"exact_match,{name}"] = bool(em)
        extracted[name] = pred
    return correct, extracted


class LongDecodeTask(SizedTask):
    name = "gsm8k_longdecode"
    description = (
        "K GSM8K test questions answered in one response (K = 10/25/50; LongGenBench-style), "
        "each answer scored separately; length axis = K; max new tokens are per answer"
    )
    metrics = ["exact_match,strict-match", "exact_match,flexible-extract"]
    default_lengths = DEFAULT_K
    num_docs = 20  # prompts per K
    max_new_tokens = TOKENS_PER_ANSWER  # per answer: a request may generate K times this
    params: dict[str, Any] = {}

    def requests(
        self,
        *,
        tokenizer: Any = None,
        lengths: list[int] | None = None,
        limit: int | None = None,
        seed: int | None = None,
        data_dir: str | None = None,
        apply_chat_template: bool = False,
        show_progress: bool = True,
    ) -> list[TaskRequest]:
        ks = list(lengths or self.default_lengths)
        bad = [k for k in ks if not 1 <= k <= MAX_K]
        if bad:
            raise InputError(
                f"{self.name}'s lengths are questions per prompt (K, 1..{MAX_K}), e.g. 10,25,50; got {bad}"
            )
        view = TokenizerView(tokenizer) if tokenizer is not None else None
        test = load_rows("test", data_dir)
        n_prompts = self.num_docs if limit is None else int(limit)
        seed = resolve_seed(seed)
        out = []
        with progress(sum(min(n_prompts, len(test) // k) for k in ks), self.name, show_progress) as bar:
            for k in ks:
                for j in range(min(n_prompts, len(test) // k)):
                    ids = list(range(j * k, (j + 1) * k))
                    ex = longdecode_example([test[i]["question"] for i in ids])
                    prompt = render(ex, view, apply_chat_template)
                    length = None
                    if view is not None:
                        length = view.count(prompt, chat=apply_chat_template)
                    docs = [
                        DocRef(
                            doc_id=i,
                            target=test[i]["answer"].split("####")[-1].strip(),
                            meta={"position": n + 1},
                        )
                        for n, i in enumerate(ids)
                    ]
                    max_new = k * self.max_new_tokens
                    out.append(
                        TaskRequest(
                            task=self.name,
                            prompt=prompt,
                            max_new_tokens=max_new,
                            until=[],
                            docs=docs,
                            length=k,
                            meta={
                                "k": k,
                                "prompt_index": j,
                                "length": length,
                                "chat": apply_chat_template,
                                "seed": seed,
                                "gen_prefix": ex.gen_prefix,
                                "max_seq_tokens": None if length is None else length + max_new,
                            },
                        )
                    )
                    bar.update(1)
        return out

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        k = len(request.docs)
        segments = split_answers(request.meta.get("gen_prefix", "Answer 1:") + response, k)
        out = []
        for doc in request.docs:
            correct, extracted = score_answer(segments.get(doc.meta["position"]), doc.target)
            out.append(ScoredDoc(doc.doc_id, doc.target, correct, extracted))
        return out
