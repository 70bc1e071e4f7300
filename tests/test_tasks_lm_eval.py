"""The long-context tasks as lm-eval tasks: lm-eval's TaskManager loads evalkit's YAMLs
(`--include_path`), builds the docs through evalkit's generators with the tokenizer named in
the metadata (as RULER does), asks exactly the prompts `evalkit run` asks, and scores a perfect
model 1.0 and a wrong one 0.0."""

from __future__ import annotations

import logging

import pytest

from evalkit.tasks import lm_eval_dir
from evalkit.tasks.data import BUNDLED_DIR
from evalkit.tasks.long_context.decode_tasks import DECODE_VARIANTS
from evalkit.tasks.registry import get_task
from tests.helpers.scripted_lm import generation_only_lm
from tests.helpers.task_names import RULER_TASKS

DATA = BUNDLED_DIR
TASKS = ["passkey", "niah_single_1", "niah_multikey_2", "niah_single_2"]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    path = tmp_path_factory.mktemp("tok")
    tiny_tokenizer(data_dir=str(DATA)).save_pretrained(path)
    return path


def model(answer):
    class Scripted(generation_only_lm()):
        def __init__(self):
            super().__init__()
            self.contexts = {}

        def respond(self, r) -> str:
            self.contexts[(r.task_name, r.doc["max_length"], r.doc["index"])] = r.args[0]
            return answer(r.doc)

    return Scripted()


def evaluate(lm, tok_dir, tasks=TASKS):
    import lm_eval
    from lm_eval.tasks import TaskManager

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    tm = TaskManager(
        include_defaults=False,
        include_path=str(lm_eval_dir()),
        metadata={
            "tokenizer": str(tok_dir),
            "max_seq_lengths": [4096],
            "num_samples": 2,
            "data_dir": str(DATA),
        },
    )
    return lm_eval.simple_evaluate(
        model=lm, tasks=[f"evalkit_{t}" for t in tasks], task_manager=tm, bootstrap_iters=0
    )


def test_lm_eval_loads_builds_and_scores(tok_dir):
    from transformers import AutoTokenizer

    perfect = model(lambda doc: " " + ", ".join(doc["outputs"]) + ".")
    res = evaluate(perfect, tok_dir)
    for t in TASKS:
        r = res["results"][f"evalkit_{t}"]
        assert r["string_match_all,none"] == 1.0 and r["4096,none"] == 1.0 and r["8192,none"] == -1
    # lm-eval asks what evalkit asks (same tokenizer, seed, length, doc index)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    for t in TASKS:
        reqs = get_task(t).requests(tokenizer=tok, lengths=[4096], limit=2, data_dir=str(DATA))
        for i, req in enumerate(reqs):
            assert perfect.contexts[(f"evalkit_{t}", 4096, i)] == req.prompt

    wrong = evaluate(model(lambda doc: " no idea"), tok_dir)
    for t in TASKS:
        assert wrong["results"][f"evalkit_{t}"]["string_match_all,none"] == 0.0


def test_every_long_task_has_a_yaml():
    names = {p.stem for p in lm_eval_dir().glob("evalkit_*.yaml")}
    expected = {*RULER_TASKS, *DECODE_VARIANTS}
    assert names == {f"evalkit_{n}" for n in expected}


def test_lm_eval_scores_decode_heavy_tasks_per_item(tok_dir):
    tasks = ["copy_list", "kv_recite_long"]
    res = evaluate(model(lambda doc: " " + " ".join(doc["outputs"])), tok_dir, tasks)
    for t in tasks:
        r = res["results"][f"evalkit_{t}"]
        assert r["item_match_all,none"] == 1.0 and r["item_fraction,none"] == 1.0 and r["4096,none"] == 1.0
    half = evaluate(
        model(lambda doc: " " + " ".join(doc["outputs"][: len(doc["outputs"]) // 2])), tok_dir, tasks
    )
    for t in tasks:
        r = half["results"][f"evalkit_{t}"]
        assert r["item_match_all,none"] == 0.0 and r["item_fraction,none"] == 0.5
