"""`evalkit drift link`: per-question replay of two arms, and the flip-vs-divergence tests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalkit.cli import main as cli_main
from evalkit.drift.link_stats import flip_analysis


def test_flips_with_larger_divergence_are_detected_and_named():
    rng = np.random.default_rng(0)
    kl = list(10 ** rng.normal(-6, 0.5, 60))
    flips = [False] * 60
    for i in rng.choice(60, 8, replace=False):
        kl[i] *= 30  # the flipped questions diverged ~30x more
        flips[i] = True
    a = flip_analysis(flips, kl)
    assert a["n_flipped"] == 8 and a["mann_whitney"]["p"] < 0.01 and a["mann_whitney"]["auc"] > 0.85
    assert (
        a["logistic"]["estimable"]
        and a["logistic"]["odds_ratio_per_10x"] > 1
        and a["logistic"]["p_lr"] < 0.05
    )
    assert (
        "Mann–Whitney U one-sided p" in a["text"]
        and "logistic regression of flip on log10 mean KL" in a["text"]
    )
    # the same KLs with flips unrelated to them: no evidence
    null = flip_analysis(list(rng.permutation(flips)), sorted(kl))
    assert null["mann_whitney"]["p"] > 0.05 or null["mann_whitney"]["auc"] < 0.8
    assert flip_analysis([False] * 5, [1e-6] * 5)["text"].startswith("no question flipped")


def _fake_runs(tmp_path, ckpt, candidate_format):
    """Two run directories over passkey docs built for 160 tokens, as `evalkit run` writes them."""
    from evalkit.model import load_model
    from evalkit.store import prompt_hash
    from evalkit.tasks.registry import get_task

    tok = load_model(str(ckpt), device="cpu").tokenizer
    reqs = get_task("passkey").requests(tokenizer=tok, lengths=[160], limit=4, seed=0)
    dirs = {}
    for side, fmt in (("base", "fp32"), ("cand", candidate_format)):
        d = tmp_path / side
        d.mkdir()
        manifest = {
            "model": {"path": str(ckpt)},
            "arm": {"label": fmt, "state_dtype": fmt},
            "tasks": {"passkey": {"config": {}, "hash": "h", "lengths": [160]}},
            "limit": 4,
            "seeds": {"task_seed": 0},
        }
        (d / "manifest.json").write_text(json.dumps(manifest))
        with open(d / "samples.jsonl", "w") as f:
            for i, r in enumerate(reqs):
                right = not (side == "cand" and i in (1, 3))
                sample = {
                    "task": "passkey",
                    "doc_id": r.docs[0].doc_id,
                    "length": 160,
                    "prompt_hash": prompt_hash(r.prompt),
                    "target": "x",
                    "response": f"The pass key is {1000 * (i + 1) + 7}. Remember it. " * (1 + i),
                    "correct": {"string_match_all": right},
                    "error": None,
                }
                f.write(json.dumps(sample) + "\n")
        dirs[side] = d
    return dirs


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_link_replays_each_answer_under_both_arms(tiny_hybrid_ckpt, tmp_path, capsys, fmt):
    runs = _fake_runs(tmp_path, tiny_hybrid_ckpt, fmt)
    out = tmp_path / "link"
    argv = ["drift", "link", str(runs["base"]), str(runs["cand"]), "--out", str(out), "--device", "cpu"]
    assert cli_main([*argv, "--chunk-size", "64"]) == 0
    res = json.loads((out / "link.json").read_text())
    qs = res["questions"]
    assert len(qs) == 4 and [q["flipped"] for q in qs] == [False, True, False, True]
    assert all(q["n_tokens"] > 10 and q["prompt_tokens"] > 100 for q in qs)
    assert res["analysis"]["n_flipped"] == 2 and "Mann–Whitney" in res["analysis"]["mann_whitney"]["test"]
    if fmt == "fp32":  # the same computation twice: exactly no divergence
        assert all(q["mean_kl"] == 0.0 and q["state_rel_err"] == 0.0 for q in qs)
    else:
        assert all(q["mean_kl"] > 0 and q["state_rel_err"] > 0 for q in qs)
    assert "Divergence and accuracy" in capsys.readouterr().out


def test_link_refuses_runs_without_a_state_format(tiny_hybrid_ckpt, tmp_path, capsys):
    runs = _fake_runs(tmp_path, tiny_hybrid_ckpt, "bf16")
    m = json.loads((runs["cand"] / "manifest.json").read_text())
    m["arm"] = {"label": "vllm-server"}
    (runs["cand"] / "manifest.json").write_text(json.dumps(m))
    assert (
        cli_main(["drift", "link", str(runs["base"]), str(runs["cand"]), "--out", str(tmp_path / "o")]) == 2
    )
    assert "pass --candidate-format" in capsys.readouterr().err
