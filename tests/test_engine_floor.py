"""The engine benchmark's floor (evalkit.bench.engine_floor): the anchors' arithmetic, and the
parameter counts that scale it to a model cut to its first layers."""

from __future__ import annotations

import pytest

from evalkit.bench import engine_floor as ef


def test_the_anchor_floor_of_the_gsm8k_workload():
    """1,319 prompts x 900 tokens at 110k tok/s, then three waves of 512 x 256 steps at 22 ms:
    10.79 + 16.90 s (the 27.7 s the committed engine rows divide by)."""
    assert ef.floor_seconds(1319, 900, 256) == pytest.approx(1319 * 900 / 110_000 + 3 * 256 * 0.022)
    assert ef.floor_seconds(1319, 900, 256) == pytest.approx(27.69, abs=0.01)


def test_the_full_model_counts_match_the_anchors():
    """The meta-device count of the 27-layer model: 49.1 B parameters of which ~95-98 GB stream in
    bf16 per large-batch step, and 3.5 B active a token once the embedding table (163,840 x 2,304)
    is added back, as anchors.md counts them. Counting every expert as active, or none, fails."""
    from evalkit.model import kimi_linear_48b_config, parse_config

    active, streamed = ef._counts(parse_config(kimi_linear_48b_config(27)))
    embedding = 163_840 * 2_304
    assert (streamed + embedding) / 1e9 == pytest.approx(49.1, abs=0.1)
    assert 95e9 <= 2 * streamed <= 98e9
    assert (active + embedding) / 1e9 == pytest.approx(3.5, abs=0.05)


def test_a_cut_model_scales_each_term_by_its_share_and_the_device_rate():
    full, part = ef.param_shares(27), ef.param_shares(12)
    assert (full.active, full.streamed) == (1.0, 1.0)
    # 12 of 27 layers, plus the lm_head that every cut keeps: more than 12/27 of the active parameters
    assert 12 / 27 < part.active < 0.6 and 0.4 < part.streamed < 12 / 27 + 0.01
    scale = ef.FloorScale(part, gemm_tflops=ef.ANCHOR_GEMM_TFLOPS / 2, copy_tbps=ef.ANCHOR_COPY_TBPS / 2)
    assert scale.prefill == pytest.approx(2 * part.active)
    assert scale.decode == pytest.approx(2 * part.streamed)
    at_anchors = ef.FloorScale(full, ef.ANCHOR_GEMM_TFLOPS, ef.ANCHOR_COPY_TBPS)
    assert ef.floor_seconds(1319, 900, 256, at_anchors) == pytest.approx(ef.floor_seconds(1319, 900, 256))
    n, prompt, new = 1319, 900, 256
    expect = n * prompt / 110_000 * scale.prefill + 3 * new * 0.022 * scale.decode
    assert ef.floor_seconds(n, prompt, new, scale) == pytest.approx(expect)


def test_the_markdown_table_puts_the_device_floor_beside_the_anchors(tmp_path):
    """A 12-layer report (values of an H100 run): each arm row carries both ratios, so the anchors'
    27-layer floor (1.23x) is never the only one a reader sees; a failed rate measurement says so."""
    from tests.helpers.scripts import load_script

    bench = load_script("bench_engine")
    row = {"wall_s": 34.06, "prefill_tok_s": 96985, "decode_tok_s": 15566, "decode_step_ms": 28.24,
           "peak_mem_gib": 67.14, "max_batch": 512, "floor_s": 27.7, "x_floor": 1.23,
           "device_floor_s": 16.5, "x_device_floor": 2.06, "extrapolated_1319_s": 34.1,
           "flags": {}}  # fmt: skip
    report = {
        "arch": "real", "device_name": "H100", "model": {"layers": 12}, "arms_prompts": 1319,
        "args": {"prompt_len": 900, "new_tokens": 256},
        "arms": {"fp16": row, "fp32": {"error": "OOM"}},
        "device_floor": {"gemm_tflops": 695.4, "copy_tbps": 3.049,
                         "prefill_scale": 0.5819, "decode_scale": 0.6047},
    }  # fmt: skip
    bench.write_markdown(report, tmp_path / "a.md")
    lines = (tmp_path / "a.md").read_text().splitlines()
    header = next(x for x in lines if x.startswith("| arm |"))
    fp16 = next(x for x in lines if x.startswith("| fp16 |"))
    cells = dict(zip(header.split("|"), fp16.split("|")))
    assert cells[" x floor "].strip() == "1.23" and cells[" x device floor "].strip() == "2.06"
    assert next(x for x in lines if x.startswith("| fp32 |")).count("|") == header.count("|")
    report["device_floor"] = {"error": "RuntimeError: out of memory"}
    bench.write_markdown(report, tmp_path / "b.md")
    assert "Device floor not measured (RuntimeError: out of memory)" in (tmp_path / "b.md").read_text()
