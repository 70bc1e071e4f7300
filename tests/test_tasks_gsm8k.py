"""GSM8K equivalence: evalkit's gsm8k / gsm8k_cot (plain and chat) against lm-eval's own
`simple_evaluate` with a scripted model on the same docs: same prompts, same stop sequences,
same filtered answers, same per-doc correctness. Plus hand-derived oracles that do not run
lm-eval (the few-shot draw of doc 0, the regex/exact-match outcomes) and the data errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from evalkit.tasks.data import BUNDLED_DIR, DataNotFoundError, locate_gsm8k
from evalkit.tasks.gsm8k import GSM8KTask
from tests.helpers.scripted_lm import generation_only_lm

DATA = BUNDLED_DIR
LIMIT = 10


# Tricky responses, doc i gets RESPONSES[i % len]: answers with $ and commas, no ####, several
# numbers, a trailing period, decimals, a stop string left in, nothing numeric.
RESPONSES = [
    " Janet sells 16 - 3 - 4 = 9 eggs.\n#### 18",
    " The total is $1,234.50",
    " She pays 3 and then 5, so 8.",
    " #### 70,000.",
    " 540.",
    " I do not know.",
    " 20 then 64\n#### 64.00",
    " The answer is 260.",
    " #### $160\n\nQuestion: what next?",
    " -45 or 45 or 460",
]


@pytest.fixture(scope="module")
def tiny_tok():
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    return tiny_tokenizer(data_dir=str(DATA))


def rows(split: str) -> list[dict]:
    with open(DATA / f"{split}.jsonl") as fh:
        return [json.loads(line) for line in fh]


def response_for(doc_id: int) -> str:
    return RESPONSES[doc_id % len(RESPONSES)]


def hflm_apply_chat_template():
    """lm-eval's HFLM.apply_chat_template. Importing lm_eval.models.huggingface needs
    `accelerate`, so when it is missing the method is compiled from that module's source."""
    try:
        from lm_eval.models.huggingface import HFLM

        return HFLM.apply_chat_template
    except ImportError:
        import ast

        import jinja2
        import lm_eval

        path = Path(lm_eval.__file__).parent / "models" / "huggingface.py"
        tree = ast.parse(path.read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HFLM")
        fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "apply_chat_template")
        ns = {"jinja2": jinja2, "eval_logger": logging.getLogger("lm_eval")}
        exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), ns)
        return ns["apply_chat_template"]


def scripted_lm(tokenizer=None):
    """A minimal lm-eval model answering from the script; with a tokenizer it renders chat
    templates with lm-eval's own HF implementation (HFLM.apply_chat_template)."""

    class Scripted(generation_only_lm()):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer
            self.chat_template_args = {}
            self.seen = {}

        apply_chat_template = hflm_apply_chat_template()

        @property
        def tokenizer_name(self) -> str:
            return "scripted"

        def respond(self, r) -> str:
            self.seen[r.doc_id] = r.args
            return response_for(r.doc_id)

    return Scripted()


def lm_eval_samples(task: GSM8KTask, tokenizer=None, chat=False):
    import lm_eval
    from lm_eval.tasks import TaskManager

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    lm = scripted_lm(tokenizer)
    res = lm_eval.simple_evaluate(
        model=lm,
        tasks=[task.lm_eval_config(str(DATA))],
        limit=LIMIT,
        task_manager=TaskManager(include_defaults=False),
        log_samples=True,
        apply_chat_template=chat,
        fewshot_as_multiturn=True,
        bootstrap_iters=0,
    )
    samples = res["samples"][task.name]
    by_filter: dict[str, dict[int, dict]] = {}
    for s in samples:
        by_filter.setdefault(s["filter"], {})[s["doc_id"]] = s
    return lm, by_filter


def assert_equivalent(task: GSM8KTask, tokenizer=None, chat=False):
    lm, by_filter = lm_eval_samples(task, tokenizer, chat)
    reqs = task.requests(tokenizer=tokenizer, limit=LIMIT, data_dir=str(DATA), apply_chat_template=chat)
    assert [r.docs[0].doc_id for r in reqs] == list(range(LIMIT))
    assert set(by_filter) == {"strict-match", "flexible-extract"}
    for req in reqs:
        doc_id = req.docs[0].doc_id
        context, gen_kwargs = lm.seen[doc_id]
        assert req.prompt == context  # byte-identical prompt
        assert req.until == gen_kwargs["until"]
        scored = task.score(req, response_for(doc_id))
        assert len(scored) == 1 and scored[0].doc_id == doc_id
        for filt, samples in by_filter.items():
            s = samples[doc_id]
            assert s["arguments"][0][0] == req.prompt
            assert scored[0].extracted[filt] == s["filtered_resps"][0]
            assert scored[0].correct[f"exact_match,{filt}"] == bool(s["exact_match"])
            assert scored[0].target == s["target"]
    return by_filter


def test_gsm8k_matches_lm_eval():
    by_filter = assert_equivalent(GSM8KTask("gsm8k"))
    # the script exercises both outcomes of both filters
    for filt in by_filter.values():
        assert {s["exact_match"] for s in filt.values()} == {0.0, 1.0}


def test_gsm8k_cot_matches_lm_eval():
    assert_equivalent(GSM8KTask("gsm8k_cot"))


def test_gsm8k_chat_multiturn_matches_lm_eval(tiny_tok):
    by_filter = assert_equivalent(GSM8KTask("gsm8k"), tokenizer=tiny_tok, chat=True)
    prompt = by_filter["strict-match"][0]["arguments"][0][0]
    # five shots as user/assistant turns of the ChatML template, then the question
    assert prompt.count("<|im_start|>user\n") == 6 and prompt.count("<|im_start|>assistant\n") == 6
    assert prompt.endswith("\nAnswer:<|im_end|>\n<|im_start|>assistant\n")


def test_gsm8k_cot_chat_matches_lm_eval(tiny_tok):
    assert_equivalent(GSM8KTask("gsm8k_cot"), tokenizer=tiny_tok, chat=True)


def test_doc0_prompt_from_the_raw_data():
    """Independent of lm-eval's code: doc 0's shots are train rows random.Random(1234).sample(train, 5)
    = [6374, 3610, 957, 61, 742] (lm-eval notes), joined as Question/Answer blocks."""
    train, test = rows("train"), rows("test")
    shots = [train[i] for i in (6374, 3610, 957, 61, 742)]
    expected = "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in shots)
    expected += f"Question: {test[0]['question']}\nAnswer:"
    req = GSM8KTask("gsm8k").requests(limit=1, data_dir=str(DATA))[0]
    assert req.prompt == expected
    assert req.until == ["Question:", "</s>", "<|im_end|>"] and req.max_new_tokens == 256


@pytest.mark.parametrize(
    "response, strict, flexible",
    [
        (" 9 * 2 = 18\n#### 18", True, True),
        (" #### 1,8", True, True),  # commas are ignored, so "1,8" == "18"
        (" $18", False, True),  # no ####; the $ is ignored
        (" 18.", False, True),  # trailing period ignored
        (" 17 apples, then 18 apples, then 19", False, False),  # flexible takes the last number
        (" #### 18.00", False, False),  # decimals are not normalised
        (" $1,234.50", False, False),
        (" no idea", False, False),
    ],
)
def test_scoring_oracle(response, strict, flexible):
    """Outcomes derived by hand from the filters' regexes and exact_match's ignore rules."""
    doc = rows("test")[0]  # gold 18
    s = GSM8KTask("gsm8k").score_doc(0, doc, response)
    assert s.correct == {"exact_match,strict-match": strict, "exact_match,flexible-extract": flexible}


def test_missing_data_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("EVALKIT_DATA", raising=False)
    with pytest.raises(DataNotFoundError) as err:
        locate_gsm8k(str(tmp_path))
    msg = str(err.value)
    for part in (str(tmp_path), "--data-dir", "EVALKIT_DATA", "bundled"):
        assert part in msg
    assert "\n" not in msg


def test_offline_with_no_folder_named_reads_the_bundled_copy(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("EVALKIT_DATA", raising=False)
    src = locate_gsm8k()
    assert src.kind == "local" and src.files["test"] == DATA / "test.jsonl"


def test_evalkit_data_env_is_used(monkeypatch):
    monkeypatch.setenv("EVALKIT_DATA", str(DATA.parent))  # a parent holding gsm8k/ works too
    src = locate_gsm8k(None, allow_hub=False)
    assert src.kind == "local" and src.files["test"] == DATA / "test.jsonl"


def test_cli_error_for_missing_data(tmp_path):
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "HF_DATASETS_OFFLINE": "1", "HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "evalkit", "tasks", "--show", "gsm8k", "--data-dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert "GSM8K not found" in out.stderr and "Traceback" not in out.stderr


def test_the_bundled_gsm8k_copy_is_the_published_one():
    """The pinned copy under evalkit/assets/gsm8k is byte-for-byte the authors' release."""
    import hashlib

    expected = {
        "test.jsonl": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        "train.jsonl": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    }
    for name, digest in expected.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
