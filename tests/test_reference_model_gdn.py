"""The trained Gated DeltaNet twin (evalkit/assets/reference-model-gdn: every layer GDN, no
attention layer, a shape the tiny random checkpoints do not have) through evalkit's engine on
the CPU against transformers' own Qwen3_5ForCausalLM on the same checkpoint: logits of a real
passkey prompt (full forward, and prefill chunks then single-token steps), and the greedy answer."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from evalkit.engine import LLMEngine, SamplingParams  # noqa: E402
from tests.helpers.drive import drive_logits  # noqa: E402
from tests.helpers.numerics import rel_err  # noqa: E402

GDN = Path(__file__).resolve().parents[1] / "evalkit" / "assets" / "reference-model-gdn"
pytestmark = pytest.mark.skipif(not (GDN / "model.safetensors").is_file(), reason="GDN twin not installed")


@pytest.fixture(scope="module")
def setup():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.tasks.registry import get_task

    tok = AutoTokenizer.from_pretrained(GDN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(GDN, dtype=torch.float32).eval()
    assert hf.config.model_type == "qwen3_5_text" and set(hf.config.layer_types) == {"linear_attention"}
    (req,) = get_task("passkey").requests(tokenizer=tok, lengths=[512], limit=1, show_progress=False)
    ids = tok(req.prompt)["input_ids"]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(torch.tensor([ids]), use_cache=False).logits[0]
    engine = LLMEngine(str(GDN), device="cpu", state_dtype="fp32")
    return hf, engine, ids, ref, req


def test_engine_logits_equal_transformers_on_the_trained_twin(setup):
    _, engine, ids, ref, _ = setup
    n = len(ids)
    assert rel_err(drive_logits(engine, ids, [n], 0), ref) <= 1e-4
    assert rel_err(drive_logits(engine, ids, [n // 2, 64, n - n // 2 - 64 - 20], 20), ref) <= 1e-4


def test_engine_greedy_answer_equals_transformers(setup):
    from evalkit.refmodel.decoder import Decoder

    hf, engine, ids, _, req = setup
    want = Decoder(hf, torch.device("cpu")).generate(ids, 12, {engine.tokenizer.eos_token_id})
    (out,) = engine.generate([ids], SamplingParams(max_new_tokens=12), use_tqdm=False)
    assert out.token_ids[: len(want)] == want and len(want) > 0
