"""The benchmarks' stub engine takes requests as the real engine does and answers deterministically."""

from __future__ import annotations

from array import array

from evalkit.bench.stub_engine import CANNED, StubEngine
from evalkit.engine.sampling import SamplingParams


def _tok():
    from evalkit.tasks.data import BUNDLED_DIR
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    return tiny_tokenizer(data_dir=str(BUNDLED_DIR))


def test_stub_answers_each_request_in_one_step_with_its_forced_answer():
    tok = _tok()
    eng = StubEngine(tok)
    a = eng.add_request("a prompt", SamplingParams(max_new_tokens=50))
    b = eng.add_request(array("l", [5, 6, 7]), SamplingParams(max_new_tokens=50), forced_answer=[9, 10])
    fork = eng.forced_request_id(b)
    assert fork is not None and eng.forced_request_id(a) is None
    first = eng.step()
    assert [o.request_id for o in first.outputs] == [a]
    assert first.outputs[0].text == tok.decode(tok.encode(CANNED, add_special_tokens=False))
    assert first.prefilled_tokens == len(tok.encode("a prompt"))
    second = eng.step()
    assert [o.request_id for o in second.outputs] == [b, fork]
    assert second.outputs[0].n_prompt == 3
    assert second.outputs[1].forced.tokens == [9, 10] and len(second.outputs[1].forced.margins) == 2
    assert not eng.has_unfinished() and not eng.step().outputs
    assert eng.stats["prefill_tokens"] == first.prefilled_tokens + 3
