"""What the tests of the trained reference models (KDA's GDN twin, the Mamba2 model) share: the
checkpoint through transformers' own class and through evalkit's engine on one real passkey
prompt, and a committed sweep's paired report checked against counts made from its samples."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest


def hf_and_engine(model_dir: Path):
    """(transformers model, evalkit engine, prompt ids, transformers' logits, request) for one
    passkey prompt of 512 tokens, both in fp32 on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.engine import LLMEngine
    from evalkit.tasks.registry import get_task

    tok = AutoTokenizer.from_pretrained(model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    (req,) = get_task("passkey").requests(tokenizer=tok, lengths=[512], limit=1, show_progress=False)
    ids = tok(req.prompt)["input_ids"]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(torch.tensor([ids]), use_cache=False).logits[0]
    engine = LLMEngine(str(model_dir), device="cpu", state_dtype="fp32")
    return hf, engine, ids, ref, req


def compare_rows(sweep: Path, arm: str) -> list[dict]:
    """`evalkit compare` fp32 vs `arm` of a sweep directory, as its JSON rows."""
    from evalkit.compare import build_report, render_json
    from evalkit.store import load_run

    report = build_report(load_run(sweep / "fp32"), load_run(sweep / arm))
    return json.loads(render_json(report))["rows"]


def assert_rows_match_samples(sweep: Path, arm: str) -> list[dict]:
    """The paired rows (accuracy, difference, discordant counts, McNemar mid-p, Holm) equal the
    counts `sample_oracle` makes from the samples with scipy and statsmodels; returns the rows."""
    from . import sample_oracle

    rows = compare_rows(sweep, arm)
    want = sample_oracle.paired(sweep / "fp32", sweep / arm)
    assert {(r["task"], r["length"]) for r in rows} == set(want)
    for r in rows:
        w = want[(r["task"], r["length"])]
        assert {k: r[k] for k in w} == {k: pytest.approx(v, abs=1e-12) for k, v in w.items()}, r
    return rows
