"""The decode-heavy tasks (copy_list, kv_recite, register and their long-answer variants): exact
token lengths, reproducible docs, per-item scoring in answer order, long answers, and the
per-item flags reaching the run's samples."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from evalkit.backends.base import GenResult
from evalkit.reference_model import default_model_path
from evalkit.runner.execute import samples_for
from evalkit.runner.plan import WorkItem
from evalkit.tasks.long_context import decode_generators as dg
from evalkit.tasks.long_context.decode_tasks import DECODE_VARIANTS
from evalkit.tasks.long_context.itemwise import found_items, ordered_items
from evalkit.tasks.registry import get_task, task_names


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(default_model_path()))


@pytest.mark.parametrize("name", list(DECODE_VARIANTS))
def test_builds_at_exact_length_reproducibly_and_scores_per_item(tok, name):
    assert name in task_names()
    task = get_task(name)
    target = task.default_lengths[0]
    a = task.requests(tokenizer=tok, lengths=[target], limit=2)
    b = get_task(name).requests(tokenizer=tok, lengths=[target], limit=2)
    assert [r.prompt for r in a] == [r.prompt for r in b] and a[0].prompt != a[1].prompt
    req = a[0]
    n = len(tok(req.prompt, add_special_tokens=False)["input_ids"]) + 1  # + BOS, as the engine counts
    assert req.meta["length"] == n and 0.98 * target <= n <= target
    items = req.docs[0].meta["answers"]
    assert len(items) == task.params["items"]
    answer = " ".join(items)
    assert len(tok(answer, add_special_tokens=False)["input_ids"]) <= req.max_new_tokens
    (perfect,) = task.score(req, " " + answer + ".")
    assert perfect.correct == {"item_match_all": True} and perfect.score["item_match_all"] == 1.0
    assert perfect.item_correct == [True] * len(items)
    broken = list(items)
    broken[-1] = "zz"  # the last item wrong
    (last_wrong,) = task.score(req, " ".join(broken))
    assert last_wrong.item_correct == [True] * (len(items) - 1) + [False]
    assert last_wrong.correct["item_match_all"] is False
    assert last_wrong.score["item_match_all"] == pytest.approx(1 - 1 / len(items))


@pytest.mark.parametrize("name", [n for n in DECODE_VARIANTS if n.endswith("_long")])
def test_long_variants_need_at_least_256_generated_tokens(tok, name):
    task = get_task(name)
    req = task.requests(tokenizer=tok, lengths=[task.default_lengths[0]], limit=1)[0]
    assert len(tok(" ".join(req.docs[0].meta["answers"]), add_special_tokens=False)["input_ids"]) >= 256


def test_items_option_is_the_dial():
    task = get_task("copy_list", items=5)
    assert task.params["items"] == 5 and task.max_new_tokens == 5 * 4 + 16
    assert task.config()["params"]["items"] == 5  # hashed into the manifest


@pytest.mark.parametrize("make", [dg.copy_example, dg.recite_example, dg.register_example])
def test_items_do_not_depend_on_the_filler(make):
    small, big = make(random.Random(7), 3, 6), make(random.Random(7), 300, 6)
    assert small.answers == big.answers and len(big.text) > len(small.text)


def test_register_answers_follow_the_steps():
    ex = dg.register_example(random.Random(3), 5, 20)
    value = int(ex.text.split("starts at ")[1][0])
    for step, got in zip(ex.needles, ex.answers):
        d = int(step.rstrip(".").split()[-1])
        value = (value + d) % 10 if " add " in step else (value - d) % 10
        assert got == str(value)


def test_scoring_rules():
    assert ordered_items(" 01, 02 03.", ["01", "02", "03", "04"]) == [True, True, True, False]
    assert ordered_items("01 03 04", ["01", "02", "03"]) == [True, False, False]  # a dropped item shifts
    assert found_items("b-b: 2\na-a: 1", ["a-a: 1", "b-b: 2", "c-c: 3"]) == [True, True, False]


def test_item_flags_reach_the_sample(tok):
    task = get_task("register", items=4)
    req = task.requests(tokenizer=tok, lengths=[1024], limit=1)[0]
    items = req.docs[0].meta["answers"]
    wrong_first = str((int(items[0]) + 1) % 10)
    result = GenResult(text=" ".join([wrong_first, *items[1:]]), n_generated=9)
    (sample,) = samples_for(WorkItem(task, req, {str(req.docs[0].doc_id)}), result, "h")
    assert sample.item_correct == [False, True, True, True]
    assert sample.correct == {"item_match_all": False} and sample.n_generated == 9
