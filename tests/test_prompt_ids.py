"""A sized task's prompt token ids (measured while building) reach the engine in place of a second
tokenization: they equal the engine's own encoding, survive the prompt cache and the worker pool,
are passed on only for the tokenizer they were made with, and leave every sample unchanged."""

from __future__ import annotations

import json
from array import array

import pytest

from evalkit.backends.base import GenRequest
from evalkit.backends.local import LocalBackend, encode_prompt
from evalkit.bench.stub_engine import StubEngine
from evalkit.runner import RunSpec, run_evaluation
from evalkit.runner.prompt_ids import same_tokenizer
from evalkit.tasks.data import BUNDLED_DIR
from evalkit.tasks.long_context import prompt_cache
from evalkit.tasks.registry import get_task
from evalkit.tasks.tokenizer import TokenizerView

DATA = str(BUNDLED_DIR)


@pytest.fixture(scope="module")
def tok():
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    return tiny_tokenizer(data_dir=DATA)


def _build(tok, name="passkey", chat=False, lengths=(300, 700)):
    return get_task(name).requests(
        tokenizer=tok, lengths=list(lengths), limit=2, data_dir=DATA, apply_chat_template=chat
    )


def test_encode_measure_is_measure_with_the_ids(tok):
    view = TokenizerView(tok)
    text = "alpha beta gamma. The pass key is 12345. Remember it."
    ids, positions = view.encode_measure(text, ["12345", "absent"])
    assert list(ids) == list(tok.encode(text))
    assert view.measure(text, ["12345", "absent"]) == (len(ids), positions)


@pytest.mark.parametrize("name", ["passkey", "niah_single_1", "kv_retrieval"])
def test_sized_requests_carry_the_engines_own_encoding(tok, name):
    for req in _build(tok, name):
        assert isinstance(req.prompt_ids, array)
        assert list(req.prompt_ids) == encode_prompt(tok, req.prompt)
        assert len(req.prompt_ids) == req.meta["length"]


def test_chat_rendered_prompts_carry_no_ids(tok):
    if not TokenizerView(tok).has_chat_template:
        tok = _with_template(tok)
    assert all(r.prompt_ids is None for r in _build(tok, chat=True))


def _with_template(tok):
    import copy

    tok = copy.deepcopy(tok)
    tok.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    return tok


def test_ids_survive_the_cache_and_the_worker_pool(tok, tmp_path, monkeypatch):
    fresh = _build(tok)
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", str(tmp_path))
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "2")
    cold = _build(tok)
    warm = _build(tok)
    assert [list(r.prompt_ids) for r in warm] == [list(r.prompt_ids) for r in fresh]
    assert fresh == cold == warm


def test_cached_ids_of_the_wrong_length_are_a_miss(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", str(tmp_path))
    first = _build(tok)
    (path,) = tmp_path.rglob("300-0.ids")
    path.write_bytes(path.read_bytes()[:-4])  # one id short
    assert prompt_cache.PromptCache(path.parent).get(300, 0) is None
    assert prompt_cache.PromptCache(path.parent).get(300, 1) == first[1]
    path.unlink()
    assert prompt_cache.PromptCache(path.parent).get(300, 0) is None
    assert _build(tok) == first  # rebuilt
    assert prompt_cache.PromptCache(path.parent).get(300, 0) == first[0]


def test_ids_bytes_round_trip():
    ids = [0, 1, 255, 65_535, 2**31 - 1]
    assert prompt_cache.ids_to_bytes(ids) == b"".join(i.to_bytes(4, "little") for i in ids)
    assert list(prompt_cache.ids_from_bytes(prompt_cache.ids_to_bytes(ids))) == ids


class _Holder:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer


def test_same_tokenizer(tok):
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    assert same_tokenizer(tok, _Holder(tok))
    assert same_tokenizer(tok, _Holder(tiny_tokenizer(data_dir=DATA)))  # equal, not the same object
    assert not same_tokenizer(tok, _Holder(tiny_tokenizer(vocab_size=600, data_dir=DATA)))
    assert not same_tokenizer(tok, _Holder(None)) and not same_tokenizer(None, _Holder(tok))
    assert not same_tokenizer(tok, object())


def test_local_backend_takes_the_carried_ids(tok):
    backend = LocalBackend(engine=StubEngine(tok))
    text = "some prompt text that is long enough"
    carried = array("i", [7, 8, 9])
    got = {}
    reqs = [
        GenRequest(prompt=text, max_new_tokens=4, prompt_ids=carried),
        GenRequest(prompt=text, max_new_tokens=4),
    ]
    backend.generate(reqs, lambda i, r: got.__setitem__(i, r))
    assert got[0].n_prompt == 3  # the carried ids, not a new encoding
    assert got[1].n_prompt == len(tok.encode(text))


def _run(tmp_path, tok, name, monkeypatch, ids: bool):
    if not ids:
        monkeypatch.setattr("evalkit.runner.execute.same_tokenizer", lambda *a: False)
    spec = RunSpec(
        tasks=["passkey", "niah_single_1"],
        out_dir=tmp_path / name,
        lengths=[300, 600],
        limit=2,
        data_dir=DATA,
        gold_logprob=True,
        manifest={"model": {}, "arm": {"label": "x"}},
    )
    engine = StubEngine(tok)
    seen = []
    add = engine.add_request
    engine.add_request = lambda prompt, *a, **k: (seen.append(type(prompt)), add(prompt, *a, **k))[1]
    run_evaluation(spec, LocalBackend(engine=engine), tok, progress=False)
    assert set(seen) == ({array} if ids else {list})  # carried ids, or the backend's own encoding
    rows = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    return {
        (r["task"], r["doc_id"], r["length"]): {k: v for k, v in r.items() if k != "timings"} for r in rows
    }


def test_a_run_with_carried_ids_equals_one_that_tokenizes(tmp_path, tok, monkeypatch):
    carried = _run(tmp_path, tok, "ids", monkeypatch, ids=True)
    encoded = _run(tmp_path, tok, "text", monkeypatch, ids=False)
    assert len(carried) == 8 and carried == encoded
    assert all(r["gold_logprob"] is not None for r in carried.values())


class _Counting:
    """A tokenizer that counts its calls on texts of at least `long` characters."""

    def __init__(self, tok, long: int):
        self._tok, self._long, self.long_calls = tok, long, 0
        self.is_fast = getattr(tok, "is_fast", False)

    def __call__(self, text, **kw):
        if isinstance(text, str) and len(text) >= self._long:
            self.long_calls += 1
        return self._tok(text, **kw)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def test_a_doc_is_tokenized_at_full_size_once_and_exactly(tok, monkeypatch):
    """Fitting counts the prompt that is then encoded with offsets: the view keeps the encoding
    of long texts, so the final encode is not a tokenization of its own, and ids and needle
    positions equal those built without the memo."""
    from evalkit.tasks import tokenizer as tk

    target = 16384  # ~60k characters with the small BPE (its calibration prompt: ~15k, below)
    calls, reqs = {}, {}
    for memo in (False, True):
        if not memo:
            monkeypatch.setattr(tk, "MEMO_MIN_CHARS", 10**9)
        else:
            monkeypatch.undo()
        counting = _Counting(tok, 30_000)
        (reqs[memo],) = get_task("niah_multikey_1").requests(
            tokenizer=counting, lengths=[target], limit=1, data_dir=DATA
        )
        calls[memo] = counting.long_calls
    req = reqs[True]
    assert len(req.prompt) >= 2 * tk.MEMO_MIN_CHARS and req.meta["length"] > 0.98 * target
    assert calls[True] == calls[False] - 1 >= 1  # the final encode (with offsets) was the memo's
    assert req.prompt == reqs[False].prompt
    assert list(req.prompt_ids) == list(reqs[False].prompt_ids) == encode_prompt(tok, req.prompt)
    assert req.meta["needle_positions"] == reqs[False].meta["needle_positions"]
    view = TokenizerView(tok)  # a hit is a copy: extending one caller's ids leaves the next one's
    view.encode(req.prompt).append(-1)
    assert view.encode(req.prompt) == encode_prompt(tok, req.prompt)


def test_the_engine_encodes_with_the_one_prompt_encoder(tok):
    """`LLMEngine.encode` is `evalkit.prompt_ids.encode_prompt` (what the backend and the server
    use): text with the tokenizer's special tokens, chat through the template without them (the
    tokenizer's own `apply_chat_template(tokenize=True)` is the oracle), ids as given; text to a
    model without a tokenizer is refused in one line."""
    from types import SimpleNamespace

    from evalkit.engine import LLMEngine
    from evalkit.errors import InputError
    from evalkit.prompt_ids import encode_prompt

    engine = SimpleNamespace(tokenizer=tok)  # encode reads nothing else of the engine
    chat = [{"role": "user", "content": "What is 2 + 2?"}]
    want_chat = list(
        tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, return_dict=True)[
            "input_ids"
        ]
    )
    cases = [("The pass key is 12345.", list(tok("The pass key is 12345.")["input_ids"])), (chat, want_chat)]
    cases += [(array("l", [5, 6, 7]), [5, 6, 7]), ([9, 8], [9, 8])]
    for prompt, want in cases:
        assert LLMEngine.encode(engine, prompt) == encode_prompt(tok, prompt) == want
    with pytest.raises(InputError, match="no tokenizer"):
        LLMEngine.encode(SimpleNamespace(tokenizer=None), "text")
