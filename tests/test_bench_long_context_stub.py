"""scripts/bench_long_context_run.py --stub: the pipeline-only benchmark runs each mode, reports
medians over repeats, and finds the cold and warm runs' samples equal."""

from __future__ import annotations

import json

import pytest
from helpers.scripts import load_script

from evalkit.reference_model import has_reference_model


@pytest.mark.skipif(not has_reference_model(), reason="needs the shipped reference model's tokenizer")
def test_stub_modes_repeat_and_agree(tmp_path):
    script = load_script("bench_long_context_run")
    argv = ["--out", str(tmp_path), "--stub", "--tasks", "passkey", "--lengths", "300", "--limit", "2"]
    assert script.main([*argv, "--modes", "cold,warm", "--repeats", "2"]) == 0
    report = json.loads((tmp_path / "bench_long_context_run.json").read_text())
    assert report["samples_equal_to_cold"] == {"warm": True}
    for mode in ("cold", "warm"):
        r = report["modes"][mode]
        assert r["repeats"] == 2 and len(r["wall_s_all"]) == 2
        assert r["samples"] == 2 and r["prompt_tokens"] > 500
        # the pipeline's share is what the engine did not spend, per million prompt tokens (the
        # stub's prompts are the same in both repeats, so the medians keep the relation; the
        # stored seconds are rounded to 1 ms)
        engine_s = r["engine_prefill_s"] + r["engine_decode_s"]
        assert r["pipeline_s"] == pytest.approx(r["wall_s"] - engine_s, abs=2e-3)
        per_m = r["pipeline_s"] / r["prompt_tokens"] * 1e6
        rounding = 1e-3 * 1e6 / r["prompt_tokens"]
        assert r["pipeline_s_per_M_prompt_tokens"] == pytest.approx(per_m, abs=rounding)
        assert sorted(r["wall_s_all"])[0] <= r["wall_s"] <= sorted(r["wall_s_all"])[-1]
    assert len(list((tmp_path / "prompt-cache").rglob("*.ids"))) == 2  # warm read what cold wrote


@pytest.mark.skipif(not has_reference_model(), reason="needs the shipped reference model's tokenizer")
def test_stub_reports_the_streaming_timeline(tmp_path):
    script = load_script("bench_long_context_run")
    argv = ["--out", str(tmp_path), "--stub", "--tasks", "passkey", "--lengths", "300", "--limit", "2"]
    for extra in ([], ["--no-stream"]):
        assert script.main([*argv, "--modes", "cold", "--stub-tok-s", "1e9", *extra]) == 0
        r = json.loads((tmp_path / "bench_long_context_run.json").read_text())["modes"]["cold"]
        assert 0 <= r["first_request_s"] <= r["last_request_s"] <= r["wall_s"]
        assert r["prefill_s_before_last_request"] >= 0 and r["samples"] == 2
