"""Request semantics of the engine: stop strings, EOS, min_tokens, max_new_tokens, health flags,
the add_request/step loop, describe(), and clear errors."""

from __future__ import annotations

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.engine.health import is_repetition, logit_flags, nonfinite_rows, state_flags
from evalkit.errors import EvalkitError

PROMPT = "Natalia sold clips to 48 of her friends in April, and then she sold half as many"


@pytest.fixture(scope="module")
def engine(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=8)


@pytest.fixture(scope="module")
def free_run(engine):
    """What the model generates for PROMPT when nothing stops it."""
    return engine.generate([PROMPT], SamplingParams(max_new_tokens=30, ignore_eos=True), use_tqdm=False)[0]


def test_max_new_tokens_and_length_reason(free_run):
    assert free_run.n_generated == 30 and len(free_run.token_ids) == 30
    assert free_run.finish_reason == "length"
    assert free_run.flags == [] or set(free_run.flags) <= {"repetition"}


def test_stop_string_cuts_text_and_stops(engine, free_run):
    tok = engine.tokenizer
    full = tok.decode(free_run.token_ids, skip_special_tokens=True)
    # a stop string that first completes around the 12th generated token
    prefix = tok.decode(free_run.token_ids[:12], skip_special_tokens=True)
    stop = prefix[-3:]
    assert stop.strip(), "pick a visible stop string"
    first = full.find(stop)
    out = engine.generate(
        [PROMPT], SamplingParams(max_new_tokens=30, stop=[stop], ignore_eos=True), use_tqdm=False
    )[0]
    assert out.finish_reason == "stop"
    assert out.text == full[:first]
    assert out.n_generated <= 12
    assert out.token_ids == free_run.token_ids[: out.n_generated]


def test_eos_stops_unless_ignored_and_min_tokens(engine, free_run):
    eos = free_run.token_ids[5]  # pretend this token is the end of text
    k = free_run.token_ids.index(eos)
    saved = set(engine.eos_ids)
    engine.eos_ids = {eos}
    try:
        out = engine.generate([PROMPT], SamplingParams(max_new_tokens=30), use_tqdm=False)[0]
        assert out.finish_reason == "eos" and out.n_generated == k + 1
        ign = engine.generate([PROMPT], SamplingParams(max_new_tokens=30, ignore_eos=True), use_tqdm=False)[0]
        assert ign.token_ids == free_run.token_ids
        later = [i for i, t in enumerate(free_run.token_ids) if t == eos and i + 1 >= k + 3]
        mt = engine.generate([PROMPT], SamplingParams(max_new_tokens=30, min_tokens=k + 3), use_tqdm=False)[0]
        assert mt.n_generated == (later[0] + 1 if later else 30)
    finally:
        engine.eos_ids = saved


def test_step_loop_for_a_server(engine, free_run):
    a = engine.add_request(PROMPT, SamplingParams(max_new_tokens=30, ignore_eos=True))
    b = engine.add_request(engine.tokenizer.encode("Weng earns"), SamplingParams(max_new_tokens=3))
    done, kinds = {}, []
    while engine.has_unfinished():
        step = engine.step()
        outs = step.outputs
        kinds.append(step.prefilled_tokens - step.decoded_sequences)  # > 0 prefill, < 0 decode
        if a not in done and engine.partial_token_ids(a) is not None:
            assert engine.partial_token_ids(a) == free_run.token_ids[: len(engine.partial_token_ids(a))]
        for o in outs:
            done[o.request_id] = o
    assert kinds[0] > 0 and any(n < 0 for n in kinds)  # a prefill step, then decode steps
    assert done[a].token_ids == free_run.token_ids and done[b].n_generated == 3
    assert engine.partial_token_ids(a) is None


def test_abort_frees_the_slot(engine):
    free = engine.state.free_slots
    rid = engine.add_request(PROMPT, SamplingParams(max_new_tokens=50))
    engine.step()
    assert engine.state.free_slots == free - 1
    assert engine.abort(rid) and not engine.has_unfinished()
    assert engine.state.free_slots == free and not engine.abort(rid)


def test_on_finish_gets_prompt_index(engine):
    seen = []
    outs = engine.generate(
        ["a", "bb b", "ccc"],
        [SamplingParams(max_new_tokens=n) for n in (5, 1, 3)],
        use_tqdm=False,
        on_finish=lambda i, o: seen.append((i, o.n_generated)),
    )
    assert sorted(seen) == [(0, 5), (1, 1), (2, 3)]
    assert [o.n_generated for o in outs] == [5, 1, 3]


def test_chat_messages_use_the_template(engine):
    msgs = [{"role": "user", "content": "What is 2 + 3?"}]
    ids = engine.encode(msgs)
    assert engine.tokenizer.decode(ids).endswith("<|assistant|>")


def test_nan_in_weights_is_flagged(tiny_hybrid_ckpt):
    eng = LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=2)
    with torch.no_grad():
        eng.model.layers[1].attn.o_proj[0, 0] = float("nan")
    out = eng.generate([PROMPT], SamplingParams(max_new_tokens=3), use_tqdm=False)[0]
    assert "nan" in out.flags


def test_overflow_threshold_flags_large_states(engine):
    eng = LLMEngine(engine.loaded, device="cpu", max_num_seqs=2, overflow_threshold=1e-3)
    out = eng.generate([PROMPT], SamplingParams(max_new_tokens=3), use_tqdm=False)[0]
    assert "overflow" in out.flags and out.state_max_abs > 1e-3
    clean = engine.generate([PROMPT], SamplingParams(max_new_tokens=3), use_tqdm=False)[0]
    assert "overflow" not in clean.flags and 0 < clean.state_max_abs < 1e3


def test_health_helpers():
    assert is_repetition([5, 6, 7] * 12) and is_repetition([1] * 40)
    assert not is_repetition(list(range(64))) and not is_repetition([1] * 10)
    assert state_flags(float("nan"), 1.0) == {"nan"}
    assert state_flags(70000.0, 32768.0) == {"overflow"} and state_flags(1.0, 32768.0) == set()


def test_nonfinite_rows_match_an_elementwise_check():
    """The one-read check (a row's min and max) against the elementwise one, on every kind of
    non-finite row, alone and mixed, and on finite rows with the largest and smallest floats."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 1000, generator=g)
    x[1, 17] = float("nan")
    x[2, 0] = float("inf")
    x[3, 999] = float("-inf")
    x[4, 5], x[4, 6] = float("inf"), float("-inf")
    x[5, 3], x[5, 900] = float("nan"), float("inf")
    x[6] = torch.finfo(torch.float32).max
    x[7, :500] = -torch.finfo(torch.float32).max
    x[8] = torch.finfo(torch.float32).tiny
    want = ~torch.isfinite(x).all(-1)
    assert nonfinite_rows(x).tolist() == want.tolist() == [False, True, True, True, True, True] + [False] * 3
    flags = logit_flags(x)
    assert [sorted(f) for f in flags[:6]] == [[], ["nan"], ["inf"], ["inf"], ["inf"], ["nan"]]


def test_describe_for_the_manifest(engine, tiny_hybrid_ckpt):
    d = engine.describe()
    assert d["model"]["path"] == str(tiny_hybrid_ckpt) and len(d["model"]["config_hash"]) == 64
    from evalkit.model.checkpoint import weights_fingerprint

    assert d["model"]["weights_fingerprint"] == weights_fingerprint(tiny_hybrid_ckpt)
    assert d["state_dtype"] == "fp32" and d["intra_chunk_dtype"] is None
    assert d["kernel_build"] and d["device"] == "cpu" and d["batch_invariant"] is True
    fp16 = LLMEngine(engine.loaded, device="cpu", state_dtype="fp16", intra_chunk_dtype="bf16")
    assert fp16.describe()["state_dtype"] == "fp16" and fp16.describe()["intra_chunk_dtype"] == "bf16"
    assert next(iter(fp16.state.kda.values())).dtype == torch.float16


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"state_dtype": "fp8"}, "state_dtype"),
        ({"temperature_bogus": 1}, "unknown engine option"),
        ({"prefill_chunk_size": 1024, "max_num_batched_tokens": 512}, "prefill_chunk_size"),
        ({"intra_chunk_dtype": "int8"}, "intra_chunk_dtype"),
    ],
)
def test_bad_options_are_clear_errors(engine, kwargs, needle):
    with pytest.raises(EvalkitError, match=needle):
        LLMEngine(engine.loaded, device="cpu", **kwargs)


def test_bad_requests_are_clear_errors(engine):
    with pytest.raises(EvalkitError, match="temperature"):
        SamplingParams(temperature=-0.7)
    with pytest.raises(EvalkitError, match="top_p"):
        SamplingParams(temperature=0.7, top_p=0.0)
    small = LLMEngine(engine.loaded, device="cpu", max_model_len=64)
    with pytest.raises(EvalkitError, match="max_model_len"):
        small.add_request(list(range(3, 60)), SamplingParams(max_new_tokens=10))
    with pytest.raises(EvalkitError, match="empty prompt"):
        small.add_request([], SamplingParams())


def test_cache_holds_every_slot_at_max_model_len(engine):
    """Admission is limited by slots, not by a cache sized without block rounding."""
    eng = LLMEngine(engine.loaded, device="cpu", max_num_seqs=4, max_model_len=79, block_size=64)
    assert eng.state.num_blocks - 1 == 4 * 2
    prompts = [list(range(3, 63))] * 8  # 60 + 8 tokens: two 64-token blocks each
    eng.generate(prompts, SamplingParams(max_new_tokens=8, ignore_eos=True), use_tqdm=False)
    assert eng.stats["max_batch"] == 4


def test_resolved_config_never_copies_a_loaded_model():
    """A loaded model holds the weights: resolving the config must share it, not deep-copy it
    (a deep copy doubled GPU memory and ran a 48B model out of memory on the H200)."""
    from evalkit.arm import parse_arm
    from evalkit.engine.config import EngineConfig

    class NoCopy:
        def __deepcopy__(self, memo):
            raise AssertionError("the loaded model was deep-copied")

    model = NoCopy()
    resolved = EngineConfig(model=model, arm=parse_arm("fp16"), device="cpu").resolved(4096)
    assert resolved.model is model and resolved.arm == parse_arm("fp16")
