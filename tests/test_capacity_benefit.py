"""The benefit side of a state format (issue 42): what a sequence's state costs in bytes, how many
sequences fit in a pool budget, and compare's account of it beside the accuracy verdict.

Oracles: the state and cache sizes are counted here from the checkpoint's config (layers x heads x
K x V x itemsize; MLA latent per token), not through the engine's planner; the sequences that fit
are worked by hand for a chosen budget."""

from __future__ import annotations

import json

import pytest

from evalkit.compare.benefit import benefit_markdown, benefit_report
from evalkit.engine import LLMEngine
from evalkit.engine.capacity import Capacity


@pytest.fixture(scope="module")
def engines(tiny_hybrid_ckpt):
    fp32 = LLMEngine(str(tiny_hybrid_ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)
    return {
        arm: fp32 if arm == "fp32" else LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2)
        for arm in ("fp32", "fp16", "fp8_e4m3", "m7")
    }


def _config(engine) -> dict:
    return json.loads((engine.loaded.path / "config.json").read_text())


def test_state_bytes_counted_from_the_checkpoint_config(engines):
    cfg = _config(engines["fp32"])
    lin = cfg["linear_attn_config"]
    kda_layers, H, K = len(lin["kda_layers"]), lin["num_heads"], lin["head_dim"]
    elements = kda_layers * H * K * K
    got = {arm: e.capacity().state_bytes_per_sequence for arm, e in engines.items()}
    assert got == {"fp32": 4 * elements, "fp16": 2 * elements, "fp8_e4m3": elements, "m7": 4 * elements}
    # the conv inputs and the attention cache are the model dtype's (fp32 on the CPU), whatever the arm
    conv = {e.capacity().conv_bytes_per_sequence for e in engines.values()}
    assert conv == {kda_layers * 3 * H * K * (lin["short_conv_kernel_size"] - 1) * 4}
    mla_layers = len(lin["full_attn_layers"])
    latent = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    assert {e.capacity().cache_bytes_per_token for e in engines.values()} == {mla_layers * latent * 4}


def test_cpu_engine_records_bytes_but_no_sequence_count(engines):
    record = engines["fp16"].describe()["capacity"]
    assert record["state_format"] == "fp16" and record["pool_budget_bytes"] is None
    assert record["per_context"]["32768"]["max_sequences"] is None
    cap = engines["fp16"].capacity()
    assert record["per_context"]["131072"]["bytes_per_sequence"] == cap.bytes_per_sequence(131072)
    assert Capacity.from_dict(record) == cap


def test_sequences_that_fit_a_budget_worked_by_hand():
    # state 1,000 B + conv 24 B + a 100-token context in blocks of 64 at 10 B/token = 1,280 B of cache
    cap = Capacity("fp16", 1000, 24, 10, 64, pool_budget_bytes=23_041)
    assert cap.bytes_per_sequence(100) == 2304
    assert cap.max_sequences(100) == 9  # 10 fit in 23,041 B; one slot is scratch
    assert Capacity("fp16", 1000, 24, 0, 64, pool_budget_bytes=23_041).bytes_per_sequence(10**6) == 1024


def _manifest(cap: Capacity | None) -> dict:
    return {"backend": {"name": "local", **({"capacity": cap.to_dict()} if cap else {})}}


def test_benefit_report_states_ratios_and_the_smaller_gain_with_a_cache():
    budget = 10**6
    base = Capacity("fp32", 4000, 0, 10, 64, budget, (1024, 8192))
    cand = Capacity("fp16", 2000, 0, 10, 64, budget, (1024, 8192))
    rep = benefit_report(_manifest(base), _manifest(cand))
    assert rep["state_bytes_ratio"] == 0.5 and rep["same_budget"]
    short, long = rep["contexts"]
    assert (short["max_sequences_baseline"], short["max_sequences_candidate"]) == (
        69,
        80,
    )  # 1e6 // 14,240 and 1e6 // 12,240, less the scratch slot
    assert (long["max_sequences_baseline"], long["max_sequences_candidate"]) == (
        10,
        10,
    )  # the cache dominates: no gain at 8k
    assert short["bytes_ratio"] == pytest.approx(12240 / 14240)
    text = "\n".join(benefit_markdown(rep))
    assert "69 → 80" in text and "0.50×" in text


def test_benefit_without_a_shared_budget_compares_bytes_only():
    a = Capacity("fp32", 4000, 0, 10, 64, None)
    b = Capacity("bf16", 2000, 0, 10, 64, None)
    rep = benefit_report(_manifest(a), _manifest(b))
    assert not rep["same_budget"] and all(r["sequences_ratio"] is None for r in rep["contexts"])
    assert "not compared" in "\n".join(benefit_markdown(rep))
    assert benefit_report(_manifest(a), _manifest(None)) is None
    assert benefit_report({"backend": {"capacity": {"state_format": "x"}}}, _manifest(b)) is None
