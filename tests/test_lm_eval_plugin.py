"""lm-eval drives evalkit's engine: `python -m evalkit.interop.lm_eval_cli run --model evalkit …`
runs GSM8K (--limit 5) through lm-eval's own CLI, and its answers are those of `evalkit run`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.cli import main as cli
from evalkit.tasks.data import BUNDLED_DIR

REPO = Path(__file__).resolve().parents[1]
DATA = BUNDLED_DIR
LIMIT, MAX_NEW = 5, 16


def offline_gsm8k_yaml(folder: Path) -> Path:
    """lm-eval's own gsm8k.yaml, pointed at the local JSONL copy (lm-eval.md §7)."""
    import lm_eval

    stock = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gsm8k_local.yaml").write_text(
        f"include: {stock}\ntask: gsm8k\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    train: {DATA / 'train.jsonl'}\n"
        f"    test: {DATA / 'test.jsonl'}\n"
    )
    return folder


@pytest.fixture(scope="module")
def lm_eval_run(tiny_hybrid_ckpt, tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_eval")
    tasks = offline_gsm8k_yaml(root / "tasks")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    model_args = f"pretrained={tiny_hybrid_ckpt},state_dtype=fp16,max_gen_toks={MAX_NEW}"
    cmd = [
        sys.executable,
        "-m",
        "evalkit.interop.lm_eval_cli",
        "run",
        "--model",
        "evalkit",
        "--model_args",
        model_args,
        "--device",
        "cpu",
        "--tasks",
        "gsm8k",
        "--include_path",
        str(tasks),
        "--limit",
        str(LIMIT),
        "--log_samples",
        "--output_path",
        str(root / "out"),
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "out", proc


def test_lm_eval_runs_gsm8k_through_the_evalkit_model(lm_eval_run):
    out, proc = lm_eval_run
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    res = results["results"]["gsm8k"]
    assert {"exact_match,strict-match", "exact_match,flexible-extract"} <= set(res)
    assert results["n-samples"]["gsm8k"]["effective"] == LIMIT
    lines = [json.loads(x) for x in next(out.rglob("samples_gsm8k_*.jsonl")).read_text().splitlines()]
    assert len(lines) == 2 * LIMIT  # one line per (doc, filter)
    assert "evalkit" in proc.stdout  # lm-eval's summary names the model


def test_lm_eval_answers_equal_evalkit_run_answers(lm_eval_run, tiny_hybrid_ckpt, tmp_path):
    out, _ = lm_eval_run
    run = tmp_path / "run"
    assert (
        cli(
            [
                "run",
                "--model",
                str(tiny_hybrid_ckpt),
                "--arm",
                "fp16",
                "--device",
                "cpu",
                "--tasks",
                "gsm8k",
                "--limit",
                str(LIMIT),
                "--data-dir",
                str(DATA),
                "--max-new-tokens",
                str(MAX_NEW),
                "--out",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
    ours = {s["doc_id"]: s for s in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}
    theirs = {}
    for line in map(json.loads, next(out.rglob("samples_gsm8k_*.jsonl")).read_text().splitlines()):
        theirs.setdefault(line["doc_id"], line)
    assert sorted(theirs) == sorted(ours) == list(range(LIMIT))
    for doc_id, line in theirs.items():
        assert line["prompt_hash"] == ours[doc_id]["prompt_hash"]  # the same lm-eval prompt
        assert line["resps"][0][0] == ours[doc_id]["response"]
    # and evalkit's store reads lm-eval's sample file as a run (what `evalkit compare` pairs)
    from evalkit.store import load_run

    loaded = load_run(next(out.rglob("samples_gsm8k_*.jsonl")))
    assert len(loaded.samples) == LIMIT


def test_loglikelihood_matches_transformers(tiny_hybrid_ckpt):
    """lm-eval's loglikelihood requests, scored by the fp32 arm, against transformers' model."""
    import torch
    from lm_eval.api.instance import Instance
    from transformers import AutoModelForCausalLM

    from evalkit.interop.lm_eval_model import EvalkitLM

    lm = EvalkitLM(pretrained=str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu")
    pairs = [
        ("Question: Natalia sold clips to 48 of her friends.", " She sold half as many"),
        ("The answer is", " 72"),
        ("", "Weng earns $12 an hour"),
    ]
    reqs = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)]
    got = lm.loglikelihood(reqs)
    text = "Betty is saving money."
    rolling = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    ref = AutoModelForCausalLM.from_pretrained(str(tiny_hybrid_ckpt), dtype=torch.float32).eval()

    def ref_logprob(ctx_ids, cont_ids):
        ids = torch.tensor([ctx_ids + cont_ids])
        with torch.no_grad():
            logp = torch.log_softmax(ref(ids, use_cache=False).logits[0].double(), -1)
        rows = range(len(ctx_ids) - 1, len(ctx_ids) + len(cont_ids) - 1)
        greedy = all(int(logp[r].argmax()) == t for r, t in zip(rows, cont_ids))
        return sum(float(logp[r, t]) for r, t in zip(rows, cont_ids)), greedy

    for (ctx, cont), (lp, greedy) in zip(pairs, got):
        want, want_greedy = ref_logprob(*lm._encode_pair(ctx, cont))
        assert math.isclose(lp, want, rel_tol=1e-4, abs_tol=1e-3) and greedy == want_greedy
    want = ref_logprob([lm._prefix_token()], lm.tokenizer.encode(text, add_special_tokens=False))[0]
    assert math.isclose(rolling[0], want, rel_tol=1e-4, abs_tol=1e-3)


def test_model_args_take_a_full_arm_and_kernel_switches(tiny_hybrid_ckpt):
    """arm=fp16@chunk=64 (the one arm parser), kernels=...;... (lm-eval splits model_args at commas)."""
    from lm_eval.utils import simple_parse_args_string

    from evalkit.interop.lm_eval_model import EvalkitLM

    args = simple_parse_args_string("arm=fp16@chunk=64,kernels=moe_combine=torch;fused_elementwise=off")
    lm = EvalkitLM(pretrained=str(tiny_hybrid_ckpt), device="cpu", **args)
    config = lm.engine.config
    assert config.arm.label == "fp16@chunk=64" and config.prefill_chunk_size == 64
    assert config.kernels.label == "moe_combine=torch,fused_elementwise=off"
    info = lm.get_model_info()
    assert info["arm"] == "fp16@chunk=64" and info["evalkit_engine"]["kernels"]["moe_combine"] == "torch"
    with pytest.raises(ValueError, match="disagree"):
        EvalkitLM(pretrained=str(tiny_hybrid_ckpt), device="cpu", arm="fp16", state_dtype="bf16")
