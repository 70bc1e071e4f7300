"""compare on multi-length tasks (rows per length, trend tests, Holm), verdict words, edge cases,
and RULER-style lm-eval sample files whose metric keys are context lengths."""

import json
import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evalkit import stats as st
from evalkit.compare import build_report, render_json, render_markdown, render_plot
from evalkit.store import RunWriter, config_hash, load_run, prompt_hash

LENGTHS = [1024, 4096, 16384, 65536]


def _manifest(arm):
    cfg = {"lengths": LENGTHS}
    return {
        "model": {"path": "m"},
        "backend": {"name": "local"},
        "arm": {"label": arm, "state_dtype": arm},
        "tasks": {"niah": {"config": cfg, "hash": config_hash(cfg)}},
    }


def _write(path, arm, outcomes):
    w = RunWriter.open(path, _manifest(arm), durable=False)
    for (doc, length), right in outcomes.items():
        w.append(
            {
                "task": "niah",
                "doc_id": doc,
                "length": length,
                "prompt_hash": prompt_hash(f"{doc}@{length}"),
                "target": "x",
                "response": "x" if right else "y",
                "correct": {"string_match": right},
                "error": None,
            }
        )
    w.finish()
    return load_run(path)


@pytest.fixture(scope="module")
def long_runs(tmp_path_factory):
    """Candidate loses accuracy as length grows (planted), 300 questions x 4 lengths."""
    rng = np.random.default_rng(11)
    base, cand = {}, {}
    for doc in range(300):
        ease = rng.normal()
        for i, length in enumerate(LENGTHS):
            pb = 1 / (1 + math.exp(-(2.0 + ease - 0.2 * i)))
            b = rng.random() < pb
            flip_to_wrong = rng.random() < 0.02 + 0.06 * i  # candidate drifts with length
            flip_to_right = rng.random() < 0.02
            base[(doc, length)] = b
            cand[(doc, length)] = (b and not flip_to_wrong) or (not b and flip_to_right)
    root = tmp_path_factory.mktemp("long")
    return _write(root / "fp32", "fp32", base), _write(root / "bf16", "bf16", cand), base, cand


def test_rows_per_length_match_direct_statistics(long_runs):
    base_run, cand_run, base, cand = long_runs
    report = build_report(base_run, cand_run)
    assert [r["length"] for r in report["rows"]] == LENGTHS
    for row in report["rows"]:
        docs = range(300)
        b_only = sum(base[(d, row["length"])] and not cand[(d, row["length"])] for d in docs)
        c_only = sum(cand[(d, row["length"])] and not base[(d, row["length"])] for d in docs)
        assert (row["n"], row["baseline_only"], row["candidate_only"]) == (300, b_only, c_only)
        assert row["mcnemar_midp"] == st.mcnemar_midp(c_only, b_only).pvalue
        ci = st.tango_ci(c_only, b_only, 300)
        assert (row["diff_ci_low"], row["diff_ci_high"]) == (ci.ci_low, ci.ci_high)
        assert len(row["baseline_only_ids"]) == b_only
    holm = multipletests([r["mcnemar_midp"] for r in report["rows"]], method="holm")[1]
    assert [r["mcnemar_midp_holm"] for r in report["rows"]] == pytest.approx(holm)
    assert report["rows"][-1]["verdict"] == "loss"


def test_trend_tests_detect_the_planted_drift(long_runs):
    base_run, cand_run, base, cand = long_runs
    (trend,) = build_report(base_run, cand_run)["trends"]
    assert trend["lengths"] == LENGTHS and trend["n_per_length"] == [300] * 4
    glm = trend["logistic_arm_x_log2len"]
    assert glm["coef"] < 0 and glm["pvalue"] < 0.01 and glm["n_clusters"] == 300
    assert trend["conditional_logistic"]["coef"] < 0
    ca = trend["cochran_armitage_discordance"]
    direct = st.cochran_armitage(trend["discordant_per_length"], [300] * 4, np.log2(LENGTHS))
    assert ca["statistic"] == pytest.approx(direct.statistic) and ca["pvalue"] < 0.01


def test_markdown_and_plot_for_lengths(long_runs, tmp_path):
    report = build_report(*long_runs[:2])
    md = render_markdown(report)
    assert "| niah | string_match | 65536 | 300 |" in md and "**loss**" in md
    assert "**Length trend**" in md and "/doubling" in md
    assert "Candidate is WORSE than baseline on niah string_match @ 4096 (-3.33 pp" in md
    render_plot(report, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 5000
    assert json.loads(render_json(report))["trends"][0]["task"] == "niah"


def _pair(tmp_path, b_only, c_only, n, margin=0.01):
    base, cand = {}, {}
    for i in range(n):
        base[(i, 1024)] = i >= b_only + c_only or i < b_only
        cand[(i, 1024)] = i >= b_only + c_only or b_only <= i < b_only + c_only
    report = build_report(
        _write(tmp_path / "b", "fp32", base), _write(tmp_path / "c", "fp16", cand), margin=margin
    )
    (row,) = report["rows"]
    return report, row


def test_identical_runs_say_no_discordant_questions(tmp_path):
    report, row = _pair(tmp_path, 0, 0, 500)
    assert row["mcnemar_midp"] == row["mcnemar_exact_p"] == 1.0 and row["mde"] is None
    assert any("no discordant questions" in n for n in row["notes"])
    assert row["noninferior"] and row["verdict"] == "identical"
    assert "non-inferior" in report["verdict"] and report["outcome"] == "identical"
    assert math.isfinite(row["diff_ci_low"]) and row["diff_ci_low"] < 0 < row["diff_ci_high"]


def test_clear_loss_is_worse_in_words(tmp_path):
    report, row = _pair(tmp_path, 40, 5, 1000)
    assert row["verdict"] == "loss" and row["diff"] == pytest.approx(-0.035)
    assert "significantly lower" in row["verdict_text"] and report["verdict"].startswith("Candidate is WORSE")


def test_small_real_loss_within_margin(tmp_path):
    _, row = _pair(tmp_path, 30, 5, 5000, margin=0.01)
    assert row["verdict"] == "minor_loss" and row["noninferior"]


def test_ruler_style_lm_eval_files_become_length_rows(tmp_path):
    """lm-eval RULER: metric keys are lengths; a doc scores under its own length and -1 elsewhere."""

    def write(folder, flip):
        folder.mkdir()
        lines = []
        for doc in range(40):
            length = (4096, 8192)[doc % 2]
            value = 1.0 if (doc % 5 != 0) != (flip and doc % 7 == 0) else 0.5
            lines.append(
                {
                    "doc_id": doc,
                    "doc": {},
                    "target": "['x']",
                    "arguments": {"gen_args_0": {"arg_0": f"p{doc}", "arg_1": {}}},
                    "resps": [["x"]],
                    "filtered_resps": ["x"],
                    "filter": "none",
                    "metrics": ["4096", "8192"],
                    "doc_hash": "h",
                    "prompt_hash": prompt_hash(f"p{doc}"),
                    "target_hash": "t",
                    "4096": value if length == 4096 else -1,
                    "8192": value if length == 8192 else -1,
                }
            )
        path = folder / "samples_niah_single_1_2026-02-03T04-05-06.789012.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return load_run(path)

    a, b = write(tmp_path / "a", False), write(tmp_path / "b", True)
    assert a.tasks == ["niah_single_1"] and {s["length"] for s in a.samples} == {4096, 8192}
    assert a.samples[0]["score"] == {"score": 0.5} and a.samples[0]["correct"] == {"score": False}
    report = build_report(a, b)
    assert [r["length"] for r in report["rows"]] == [4096, 8192]
    assert sum(r["baseline_only"] + r["candidate_only"] for r in report["rows"]) > 0


def test_plot_survives_saturated_rows(tmp_path):
    """At 100% (or 0%) a Wilson limit equals the estimate up to rounding; the error bar must not
    go negative (a saturated reference-model run crashed `--plot`)."""
    from evalkit.compare.pairing import Pair
    from evalkit.compare.plot_accuracy import render_accuracy_plot
    from evalkit.compare.rows import compute_row

    saturated = [Pair(str(i), 2048, True, True) for i in range(12)]
    row = {
        **compute_row("passkey", "string_match_all", 2048, saturated, margin=0.01),
        "wilson_baseline": (0.7575, 1.0 - 1e-16),  # the upper limit a rounding below the 100% estimate
        "wilson_candidate": (0.7575, 1.0 - 1e-16),
    }
    assert row["acc_baseline"] == row["acc_candidate"] == 1.0
    report = {
        "rows": [row, {**row, "length": 8192}],
        "baseline": {"label": "fp32"},
        "candidate": {"label": "bf16"},
    }
    out = tmp_path / "acc.png"
    render_accuracy_plot(report, out)
    assert out.stat().st_size > 1000
