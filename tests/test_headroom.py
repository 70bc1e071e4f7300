"""Overflow headroom: per-layer largest |state| and non-finite counts per sample, the format-aware
overflow flag, and bits of exponent headroom against hand values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from helpers import sample_oracle

from evalkit.compare.cell import CompareCell
from evalkit.compare.markdown import render_markdown
from evalkit.compare.report import build_report
from evalkit.engine import LLMEngine, SamplingParams
from evalkit.kernels.formats import parse_format
from evalkit.model.layers.kda import KDAttention
from evalkit.store import RunData
from evalkit.store.headroom import exponent_headroom_bits, format_max_of, headroom_line, summarise_headroom

PROMPT = "The quick brown fox jumps over the lazy dog. " * 3


def test_format_max_is_torch_finfo_and_mn_keeps_fp32_range():
    for name, dtype in [
        ("fp32", torch.float32),
        ("fp16", torch.float16),
        ("bf16", torch.bfloat16),
        ("fp8_e4m3", torch.float8_e4m3fn),
        ("fp8_e5m2", torch.float8_e5m2),
    ]:
        assert parse_format(name).max_finite == torch.finfo(dtype).max
    assert parse_format("m7").max_finite == torch.finfo(torch.float32).max
    assert parse_format("fp16-sr:3").max_finite == 65504.0


def test_exponent_headroom_by_hand():
    assert exponent_headroom_bits(65504.0, 65504.0 / 8) == pytest.approx(3.0)
    assert exponent_headroom_bits(448.0, 448.0) == 0.0
    assert exponent_headroom_bits(448.0, 896.0) == pytest.approx(-1.0)
    assert exponent_headroom_bits(65504.0, 1.0) == pytest.approx(math.log2(65504))  # 15.999...
    for nothing in (None, 0.0, math.inf, math.nan):
        assert exponent_headroom_bits(65504.0, nothing) is None


def test_summary_per_length_by_hand():
    samples = [
        {"length": 64, "state_max_abs": [1.0, 4.0], "state_nonfinite": 0, "flags": []},
        {"length": 64, "state_max_abs": [2.0, None], "state_nonfinite": 5, "flags": ["inf", "overflow"]},
        {"length": 128, "state_max_abs": [8.0, 0.5], "state_nonfinite": 0, "flags": []},
        {"length": 128, "flags": []},  # a server's sample: no state, not counted
    ]
    out = summarise_headroom(samples, 64.0)
    assert list(out) == ["64", "128", "all"]
    assert out["64"].layer_max_abs == [2.0, 4.0] and out["64"].max_abs == 4.0
    assert out["64"].headroom_bits is None and (out["64"].overflow, out["64"].nonfinite) == (1, 1)
    assert out["128"].n == 1 and out["128"].headroom_bits == 3.0  # log2(64 / 8)
    assert out["all"].layer_max_abs == [8.0, 4.0] and out["all"].n == 3
    clean = summarise_headroom(samples[:1], 64.0)["64"]
    assert clean.headroom_bits == 4.0 and clean.max_abs == 4.0  # log2(64 / 4)
    assert format_max_of({"arm": {"format": {"name": "fp8_e4m3"}}}) == 448.0
    assert format_max_of({}) == torch.finfo(torch.float32).max


def _pool_max_recorder(eng: LLMEngine) -> list[list[float]]:
    """Wrap the runner so that after every prefill/decode forward the pools are read here, in
    float64, independently of the engine's own health check: [[per layer max] per forward]."""
    seen: list[list[float]] = []
    slots = list(range(eng.state.num_slots))  # the scratch slot is left out

    def read() -> None:
        seen.append([t[slots].double().abs().amax().item() for t in eng.state.kda.values()])

    for name in ("prefill", "decode"):
        inner = getattr(eng.runner, name)

        def wrapped(*a, _inner=inner, **k):
            out = _inner(*a, **k)
            read()
            return out

        setattr(eng.runner, name, wrapped)
    return seen


@pytest.fixture(scope="module")
def loaded(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", state_dtype="fp32", max_num_seqs=1).loaded


@pytest.mark.parametrize("arm", ["fp32", "bf16"])
def test_per_layer_max_matches_the_pools_read_independently(loaded, arm):
    eng = LLMEngine(loaded, device="cpu", state_dtype=arm, max_num_seqs=1)
    seen = _pool_max_recorder(eng)
    out = eng.generate([PROMPT], SamplingParams(max_new_tokens=5, ignore_eos=True), use_tqdm=False)[0]
    expected = [max(col) for col in zip(*seen)]
    assert len(seen) >= 5 and len(expected) == len(eng.state.kda) == 3
    assert out.state_layer_max_abs == pytest.approx(expected, rel=0, abs=0)
    assert out.state_max_abs == max(expected) and out.state_nonfinite == 0
    assert "overflow" not in out.flags
    assert eng.overflow_threshold == parse_format(arm).max_finite


def test_planted_overflow_is_flagged_with_the_format_max(tiny_hybrid_ckpt):
    base = LLMEngine(str(tiny_hybrid_ckpt), device="cpu", state_dtype="fp32", max_num_seqs=1)
    with torch.no_grad():
        for layer in base.model.layers:
            attn = layer.attn
            if isinstance(attn, KDAttention):
                attn.in_proj[2 * attn.D : 3 * attn.D] *= 1e4
    params = SamplingParams(max_new_tokens=3, ignore_eos=True)
    big = base.generate([PROMPT], params, use_tqdm=False)[0]
    assert 448 < big.state_max_abs < 65504 / 4 and "overflow" not in big.flags  # fp32: room
    fp8 = LLMEngine(base.loaded, device="cpu", state_dtype="fp8_e4m3", max_num_seqs=1)
    out = fp8.generate([PROMPT], params, use_tqdm=False)[0]
    assert "overflow" in out.flags and out.state_max_abs == 448.0  # e4m3fn saturates at its max
    assert out.state_nonfinite == 0
    assert fp8.describe()["health"]["overflow_threshold"] == 448.0
    # 1e4 times larger again: fp16's 65504 is passed, its store overflows to inf
    with torch.no_grad():
        for layer in base.model.layers:
            if isinstance(layer.attn, KDAttention):
                layer.attn.in_proj[2 * layer.attn.D : 3 * layer.attn.D] *= 1e4
    fp16 = LLMEngine(base.loaded, device="cpu", state_dtype="fp16", max_num_seqs=1)
    seen = _pool_max_recorder(fp16)
    out = fp16.generate([PROMPT], params, use_tqdm=False)[0]
    assert "overflow" in out.flags and not math.isfinite(out.state_max_abs)
    assert out.state_nonfinite > 0 and any(not math.isfinite(v) for v in out.state_layer_max_abs)
    assert any(not math.isfinite(v) for row in seen for v in row)


def _run(overflowed: set[int]) -> RunData:
    samples = [
        {
            "task": "kv_recite",
            "doc_id": i,
            "length": 2048,
            "prompt_hash": f"h{i}",
            "target": "x",
            "response": "x",
            "correct": {"exact_match": i % 3 != 0},
            "error": None,
            "flags": ["overflow"] if i in overflowed else [],
        }
        for i in range(12)
    ]
    return RunData(manifest={}, samples=samples, path="mem")


def test_compare_counts_overflow_flagged_samples_per_cell_and_says_so():
    report = build_report(_run(set()), _run({1, 4, 7}), margin=0.05)
    (row,) = report["rows"]
    assert (row["overflow_baseline"], row["overflow_candidate"]) == (0, 3)
    assert row["baseline_only"] == row["candidate_only"] == 0  # the answers alone show nothing
    notes = [n for n in report["notes"] if n.startswith("overflow:")]
    assert notes == [
        "overflow: kv_recite:exact_match @ 2048: 3 of 12 candidate and 0 baseline sample(s) flagged "
        "overflow (the recurrent state reached the format's max or went non-finite)"
    ]
    assert "flagged overflow" in render_markdown(report)
    clean = build_report(_run(set()), _run(set()), margin=0.05)
    assert clean["rows"][0]["overflow_candidate"] == 0
    assert not [n for n in clean["notes"] if n.startswith("overflow:")]
    old = {k: v for k, v in row.items() if not k.startswith("overflow_")}  # a report from before
    assert CompareCell.from_dict(old).overflow_candidate == 0


HEADROOM_CPU = Path(__file__).resolve().parents[1] / "results" / "headroom-cpu"
FINFO = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
}


def _samples(run: Path) -> list[dict]:
    return [json.loads(line) for line in sample_oracle.lines(run)]


@pytest.mark.parametrize("sweep", ["sweep", "control"])
def test_committed_headroom_matches_an_independent_count(sweep):
    """sweep.json's bits of exponent headroom per arm against the samples read here: the largest
    finite per-layer |state|, torch.finfo's max, log2; and the overflow-flagged samples."""
    out = HEADROOM_CPU / sweep
    if not (out / "sweep.json").exists():
        pytest.skip("not generated")
    summary = json.loads((out / "sweep.json").read_text())
    for arm, record in summary["exponent_headroom"].items():
        samples = _samples(out / arm)
        top = max(v for s in samples for v in s["state_max_abs"] if v is not None)
        cell = record["lengths"]["2048"]
        assert cell["n"] == len(samples) == 20 and cell["max_abs"] == top
        nonfinite = sum(s["state_nonfinite"] > 0 for s in samples)
        bits = None if nonfinite else pytest.approx(math.log2(torch.finfo(FINFO[arm]).max / top))
        assert cell["headroom_bits"] == bits and cell["nonfinite"] == nonfinite
        assert cell["overflow"] == sum("overflow" in s["flags"] for s in samples)


def test_committed_control_overflow_is_counted_by_compare():
    """The positive control (v projections x 2**16): its fp16 arm is flagged overflow on every
    sample, and compare counts them though the answers alone show no difference."""
    out = HEADROOM_CPU / "control"
    if not (out / "fp16" / "manifest.json").exists():
        pytest.skip("not generated")
    from evalkit.store import load_run

    flagged = sum("overflow" in s["flags"] for s in _samples(out / "fp16"))
    (row,) = build_report(load_run(out / "fp32"), load_run(out / "fp16"), margin=0.05)["rows"]
    assert (row["overflow_baseline"], row["overflow_candidate"]) == (0, flagged) and flagged == 20


def test_the_end_of_run_line_by_hand():
    record = {
        "format_max": 448.0,
        "lengths": {
            "2048": {"n": 20, "max_abs": 2.5, "headroom_bits": 7.485, "overflow": 0, "nonfinite": 0},
            "all": {"n": 20, "max_abs": 6.3e4, "headroom_bits": None, "overflow": 20, "nonfinite": 20},
        },
    }
    assert headroom_line(record) == (
        "exponent headroom (format max 448): 2048: 7.5 bits, max |state| 2.5, 0/20 overflow; "
        "all: none (20 non-finite), max |state| 6.3e+04, 20/20 overflow"
    )
