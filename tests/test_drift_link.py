"""`evalkit drift link`: per-question replay of two arms, and the flip-vs-divergence tests."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

from evalkit.cli import main as cli_main
from evalkit.drift.link_stats import (
    _rank_sum_terms,
    flip_analysis,
    link_analysis,
    stratified_logistic,
    van_elteren,
)


def test_flips_with_larger_divergence_are_detected_and_named():
    rng = np.random.default_rng(0)
    kl = list(10 ** rng.normal(-6, 0.5, 60))
    flips = [False] * 60
    for i in rng.choice(60, 8, replace=False):
        kl[i] *= 30  # the flipped questions diverged ~30x more
        flips[i] = True
    a = flip_analysis(flips, kl)
    assert a["n_flipped"] == 8 and a["van_elteren"]["p"] < 0.01 and a["van_elteren"]["auc"] > 0.85
    assert (
        a["logistic"]["estimable"]
        and a["logistic"]["odds_ratio_per_10x"] > 1
        and a["logistic"]["p_lr"] < 0.05
    )
    # the same KLs with flips unrelated to them: no evidence
    null = flip_analysis(list(rng.permutation(flips)), sorted(kl))
    assert null["van_elteren"]["p"] > 0.05 or null["van_elteren"]["auc"] < 0.8
    assert flip_analysis([False] * 5, [1e-6] * 5)["van_elteren"] is None


def test_one_stratum_van_elteren_is_mann_whitney_asymptotic_with_ties():
    rng = np.random.default_rng(3)
    x1 = np.round(rng.normal(0.4, 1, 17), 1)  # rounded: ties within and across groups
    x0 = np.round(rng.normal(0.0, 1, 23), 1)
    ve = van_elteren([(x1, x0)])
    mw = stats.mannwhitneyu(x1, x0, alternative="greater", method="asymptotic", use_continuity=False)
    assert ve["p"] == pytest.approx(mw.pvalue, rel=1e-12)
    assert ve["auc"] == pytest.approx(mw.statistic / (17 * 23), rel=1e-12)


def test_van_elteren_moments_equal_the_exact_permutation_distribution():
    """E[T] = 0 and Var[T] = the formula, by enumerating every within-stratum relabelling."""
    strata = [np.array([1.0, 2.0, 2.0, 5.0, 7.0]), np.array([0.3, 0.3, 0.3, 0.9]), np.array([4.0, 1.0, 8.0])]
    n1s = [2, 1, 2]
    per_stratum = []
    for x, n1 in zip(strata, n1s):
        values = []
        for idx in itertools.combinations(range(x.size), n1):
            m = np.zeros(x.size, dtype=bool)
            m[list(idx)] = True
            d, _, _ = _rank_sum_terms(x[m], x[~m])
            values.append(d / (x.size + 1))
        per_stratum.append(np.array(values))
    # T is a sum of independent strata: its mean and variance add
    mean = sum(v.mean() for v in per_stratum)
    var = sum(v.var() for v in per_stratum)
    formula = 0.0
    for x, n1 in zip(strata, n1s):
        m = np.zeros(x.size, dtype=bool)
        m[:n1] = True
        formula += _rank_sum_terms(x[m], x[~m])[1] / (x.size + 1) ** 2
    assert mean == pytest.approx(0.0, abs=1e-12) and var == pytest.approx(formula, rel=1e-12)


def test_stratifying_undoes_simpsons_paradox():
    """Task A: long answers, large KL, few flips; task B: short answers, small KL, many flips; within
    each task the flipped questions diverged more. Pooled, flips look *less* divergent."""
    rng = np.random.default_rng(1)
    rows = []
    for task, centre, n_flip in (("A", 1.0, 4), ("B", -2.0, 26)):
        for i in range(30):
            flip = i < n_flip
            rows.append((task, flip, 10 ** (centre + (0.6 if flip else 0.0) + rng.normal(0, 0.3))))
    flips = [r[1] for r in rows]
    kl = [r[2] for r in rows]
    pooled = flip_analysis(flips, kl)
    strat = flip_analysis(flips, kl, [r[0] for r in rows])
    assert pooled["van_elteren"]["auc"] < 0.5
    assert strat["van_elteren"]["auc"] > 0.8 and strat["van_elteren"]["p"] < 1e-3
    assert strat["logistic"]["estimable"] and strat["logistic"]["odds_ratio_per_10x"] > 1


def test_stratified_logistic_with_one_stratum_is_the_plain_logit():
    import statsmodels.api as sm

    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, 80)
    y = (rng.random(80) < 1 / (1 + np.exp(-(0.3 + 1.2 * x)))).astype(bool)
    ours = stratified_logistic(y, x, np.array(["s"] * 80, dtype=object))
    plain = sm.Logit(y.astype(float), sm.add_constant(x)).fit(disp=0)
    assert ours["slope"] == pytest.approx(plain.params[1], rel=1e-6)
    assert ours["p_lr"] == pytest.approx(plain.llr_pvalue, rel=1e-6)


def test_losses_and_gains_are_analysed_apart():
    rows = [
        {"task": "t", "length": 8, "baseline_correct": True, "flipped": i < 5, "mean_kl": 10.0 - i}
        for i in range(12)
    ] + [{"task": "t", "length": 8, "baseline_correct": False, "flipped": False, "mean_kl": 50.0}] * 6
    a = link_analysis(rows)
    assert a["losses"]["n_questions"] == 12 and a["losses"]["n_flipped"] == 5
    assert a["losses"]["van_elteren"]["auc"] == 1.0
    assert a["gains"]["n_flipped"] == 0 and a["gains"]["van_elteren"] is None
    assert a["text"].startswith("12 questions the baseline had right: 5 lost; within task and length")
    assert "6 questions the baseline had wrong: 0 gained" in a["text"]


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
    losses = res["analysis"]["losses"]
    assert losses["n_questions"] == 4 and losses["n_flipped"] == 2
    assert "van Elteren" in losses["van_elteren"]["test"] and res["analysis"]["gains"]["n_questions"] == 0
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
