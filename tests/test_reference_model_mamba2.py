"""The trained Mamba2 reference model (models/reference-model-mamba2: NemotronH blocks alternating
Mamba2 and a relu2 MLP, no attention) through evalkit's engine on the CPU against transformers'
own NemotronHForCausalLM on the same checkpoint, and the claims of its committed H200 sweeps
(results/reference-model-mamba2/h200/) against counts made here from the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from evalkit.engine import SamplingParams  # noqa: E402
from tests.helpers.drive import drive_logits  # noqa: E402
from tests.helpers.numerics import rel_err  # noqa: E402
from tests.helpers.reference_models import assert_rows_match_samples, compare_rows, hf_and_engine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
M2 = ROOT / "models" / "reference-model-mamba2"
M2_H200 = ROOT / "results" / "reference-model-mamba2" / "h200"
pytestmark = pytest.mark.skipif(not (M2 / "model.safetensors").is_file(), reason="Mamba2 model not installed")


@pytest.fixture(scope="module")
def setup():
    hf, engine, ids, ref, req = hf_and_engine(M2)
    assert hf.config.model_type == "nemotron_h" and set(hf.config.layers_block_type) == {
        "linear_attention",
        "mlp",
    }
    return hf, engine, ids, ref, req


def test_engine_logits_equal_transformers_on_the_trained_model(setup):
    _, engine, ids, ref, _ = setup
    n = len(ids)
    assert ref.std() > 0.5
    assert rel_err(drive_logits(engine, ids, [n], 0), ref) <= 1e-4
    assert rel_err(drive_logits(engine, ids, [n // 2, 64, n - n // 2 - 64 - 20], 20), ref) <= 1e-4


def test_engine_greedy_answer_equals_transformers(setup):
    from evalkit.refmodel.decoder import Decoder

    hf, engine, ids, _, req = setup
    want = Decoder(hf, torch.device("cpu")).generate(ids, 12, {engine.tokenizer.eos_token_id})
    (out,) = engine.generate([ids], SamplingParams(max_new_tokens=12), use_tqdm=False)
    assert out.token_ids[: len(want)] == want and len(want) > 0


def test_the_model_declares_the_context_the_long_cells_need(setup):
    """Without attention nothing depends on position; the declared context must still admit the
    32k retrieval and drift cells the other two families ran (transformers' default is 4096)."""
    _, engine, *_ = setup
    assert engine.config.max_model_len >= 32768 + 64


# -- the committed H200 sweeps (issue 41) ----------------------------------------------------------


def test_committed_runs_are_of_the_installed_weights():
    from evalkit.model.checkpoint import weights_fingerprint

    want = weights_fingerprint(M2)
    manifests = sorted(M2_H200.glob("*/*/manifest.json"))
    assert len(manifests) == 26, manifests  # suite and short, 13 arms each
    for m in manifests:
        assert json.loads(m.read_text())["model"]["weights_fingerprint"] == want, m


@pytest.mark.parametrize(
    "group, arm", [("short", "fp16"), ("short", "bf16"), ("short", "m3-rtz"), ("suite", "bf16@chunk=256")]
)
def test_the_paired_reports_match_an_independent_count(group, arm):
    sweep = M2_H200 / group
    assert_rows_match_samples(sweep, arm)


def test_room_on_the_decode_heavy_cell_and_the_positive_control_loses_there():
    """Claim check (results/reference-model-mamba2/README.md; rows tested above): fp32 answers
    54 of 100 copy_list questions at 2k (in the 30-90% band); truncation to 3 bits (m3-rtz) loses
    significantly there (Holm mid-p < 0.05) while fp16 flips no answer and bf16 loses 2 points
    that are not significant."""
    rows = {
        a: {(r["task"], r["length"]): r for r in compare_rows(M2_H200 / "short", a)}
        for a in ("fp16", "bf16", "m3-rtz")
    }
    cell = ("copy_list", 2048)
    assert rows["fp16"][cell]["acc_baseline"] == 0.54 and rows["fp16"][cell]["n"] == 100
    assert rows["m3-rtz"][cell]["diff"] < -0.3 and rows["m3-rtz"][cell]["mcnemar_midp_holm"] < 0.05
    assert rows["fp16"][cell]["baseline_only"] + rows["fp16"][cell]["candidate_only"] == 0
    assert rows["bf16"][cell]["diff"] == pytest.approx(-0.02) and rows["bf16"][cell]["mcnemar_midp"] > 0.05


def test_one_store_at_the_prompt_end_equals_the_default_at_2k():
    """At 2k every prompt fits one 2048-token chunk, so `@chunk=4096` stores where the default
    does: the same samples, which is why the full-vs-chunked factor needs the longer cells."""
    from tests.helpers import sample_oracle

    for arm in ("fp16", "bf16"):
        a = sample_oracle.samples(M2_H200 / "short" / arm)
        b = sample_oracle.samples(M2_H200 / "short" / f"{arm}@chunk=4096")
        assert {c: {d: s["response"] for d, s in docs.items()} for c, docs in a.items()} == {
            c: {d: s["response"] for d, s in docs.items()} for c, docs in b.items()
        }


def test_on_copy_list_alone_fp16_is_non_inferior_at_5pp_and_bf16_is_not():
    """Claim check (the READMEs): the one-cell non-inferiority test at δ = 5 pp (Tango's score
    test, checked against published values in the stats tests) on discordant counts made here
    from the samples."""
    from evalkit.stats.noninferiority import noninferiority_test
    from tests.helpers import sample_oracle

    sweep = M2_H200 / "short"
    cell = ("copy_list", 2048)
    got = {}
    for arm in ("fp16", "bf16"):
        w = sample_oracle.paired(sweep / "fp32", sweep / arm)[cell]
        b, c, n = int(w["candidate_only"]), int(w["baseline_only"]), int(w["n"])
        got[arm] = noninferiority_test(b, c, n, margin=0.05).pvalue
    assert got["fp16"] == pytest.approx(0.0109, abs=5e-4) and got["fp16"] < 0.025
    assert got["bf16"] == pytest.approx(0.0843, abs=5e-4) and got["bf16"] > 0.025


M2_CPU = ROOT / "results" / "reference-model-mamba2" / "cpu-sweep"


def test_the_cpu_sweep_has_room_and_catches_the_positive_control():
    """Claim check (cpu-sweep, passkey at 8k, 100 questions, fp32 weights): fp32 70%; m3-rtz loses
    9 (McNemar mid-p < 0.01); fp16 flips nothing; storing once at the prompt's end
    (`@chunk=8192`) instead of every 2,048 tokens changes no fp16 or bf16 answer."""
    from tests.helpers import sample_oracle

    cell = ("passkey", 8192)
    base = sample_oracle.cell_counts(M2_CPU / "fp32")[cell]
    assert base["n"] == 100 and base["em"] == 0.70
    rtz = sample_oracle.paired(M2_CPU / "fp32", M2_CPU / "m3-rtz")[cell]
    assert rtz["baseline_only"] == 9 and rtz["candidate_only"] == 0 and rtz["mcnemar_midp"] < 0.01
    fp16 = sample_oracle.paired(M2_CPU / "fp32", M2_CPU / "fp16")[cell]
    assert fp16["baseline_only"] + fp16["candidate_only"] == 0
    for arm in ("fp16", "bf16"):
        a = sample_oracle.samples(M2_CPU / arm)[cell]
        b = sample_oracle.samples(M2_CPU / f"{arm}@chunk=8192")[cell]
        assert {d: s["response"] for d, s in a.items()} == {d: s["response"] for d, s in b.items()}
