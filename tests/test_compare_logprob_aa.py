"""issue 12: the paired log-probability measure (exactly 0 for identical runs, matches scipy on a
planted shift, says "not recorded" when absent) and the A/A noise floor on hand-computed cases."""

import numpy as np
import pytest
from scipy import stats as sps

from evalkit import stats as st
from evalkit.cli import main
from evalkit.compare import build_report, render_markdown
from evalkit.compare.logprob import first_departure
from evalkit.stats.paired_continuous import _rank_of_lower_limit
from evalkit.store import load_run
from tests.helpers.runs import write_run

N = 80


def _gold(shift: float, seed: int, flip_margins=()):
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 0.02, N)
    tokens = rng.integers(1, 6, N)

    def extra(task, doc, length):
        lp = -0.3 * int(tokens[doc]) + shift * int(tokens[doc]) + float(noise[doc])
        margin = -0.5 if doc in flip_margins else 1.0 + 0.1 * doc
        ids = list(range(10)) if shift == 0 or doc % 2 else list(range(3)) + [99] * 7
        return {
            "gold_logprob": lp,
            "gold_tokens": int(tokens[doc]),
            "gold_min_margin": margin,
            "generated_ids": ids,
        }

    return extra


def _outcomes(wrong=()):
    return {("gsm8k", d, None): d not in wrong for d in range(N)}


@pytest.fixture(scope="module")
def lp_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lp")
    base = write_run(root / "base", "fp32", _outcomes(), extra=_gold(0.0, 1))
    same = write_run(root / "same", "fp32-again", _outcomes(), extra=_gold(0.0, 1))
    worse = write_run(root / "worse", "m3", _outcomes(), extra=_gold(-0.05, 2, flip_margins=(3, 4)))
    plain = write_run(root / "plain", "fp16", _outcomes())
    return {k: load_run(v) for k, v in dict(base=base, same=same, worse=worse, plain=plain).items()}


def test_identical_runs_give_exactly_zero_and_no_verdict_noise(lp_runs):
    report = build_report(lp_runs["base"], lp_runs["same"])
    (cell,) = report["logprob"]["cells"]
    assert report["logprob"]["recorded"] and cell["n"] == N
    assert cell["mean_diff"] == 0.0 and (cell["mean_ci_low"], cell["mean_ci_high"]) == (0.0, 0.0)
    assert cell["hodges_lehmann"] == 0.0 and (cell["hl_ci_low"], cell["hl_ci_high"]) == (0.0, 0.0)
    assert cell["wilcoxon_pvalue"] == 1.0 and cell["t_pvalue"] == 1.0
    assert cell["verdict"] == "identical" and cell["noninferior"]
    assert cell["margin_sign_changes"] == {"compared": N, "lost": 0, "gained": 0, "share": 0.0}
    assert cell["first_departure"] == {"compared": N, "identical": N, "departed": 0}
    assert "never; 80 of 80 identical" in render_markdown(report)


def test_planted_loss_is_found_where_mcnemar_sees_nothing(lp_runs):
    base, worse = lp_runs["base"], lp_runs["worse"]
    report = build_report(base, worse)
    (row,) = report["rows"]
    assert row["verdict"] == "identical"  # exact match cannot see it
    (cell,) = report["logprob"]["cells"]
    b = {s["doc_id"]: s["gold_logprob"] / s["gold_tokens"] for s in base.samples}
    c = {s["doc_id"]: s["gold_logprob"] / s["gold_tokens"] for s in worse.samples}
    d = np.array([c[i] - b[i] for i in range(N)])
    assert cell["mean_diff"] == pytest.approx(d.mean())
    lo, hi = sps.t.interval(0.95, N - 1, loc=d.mean(), scale=sps.sem(d))
    assert (cell["mean_ci_low"], cell["mean_ci_high"]) == pytest.approx((lo, hi))
    assert cell["t_pvalue"] == pytest.approx(sps.ttest_rel(list(c.values()), list(b.values())).pvalue)
    assert cell["wilcoxon_pvalue"] == pytest.approx(sps.wilcoxon(d).pvalue)
    assert cell["verdict"] == "loss" and cell["mean_ci_high"] < -0.01
    assert cell["margin_sign_changes"]["lost"] == 2 and cell["margin_sign_changes"]["share"] == 2 / N
    dep = cell["first_departure"]
    assert (dep["departed"], dep["median"]) == (N // 2, 3.0)
    md = render_markdown(report)
    assert "Which measure to read" in md and "**loss**" in md


def test_not_recorded_is_one_line(lp_runs):
    report = build_report(lp_runs["plain"], lp_runs["plain"])
    assert not report["logprob"]["recorded"]
    md = render_markdown(report)
    assert "Paired log-probability of the reference answer: not recorded" in md
    assert "Which measure to read" not in md


def test_first_departure():
    assert first_departure([1, 2, 3], [1, 2, 3]) is None
    assert first_departure([1, 2, 3], [1, 5, 3]) == 1
    assert first_departure([1, 2], [1, 2, 3]) == 2


def test_signed_rank_interval_critical_values_match_the_tables():
    # two-sided 0.05 critical values of the signed-rank statistic: n = 10 -> 8, n = 20 -> 52
    assert _rank_of_lower_limit(10, 0.95) == (9, "exact")
    assert _rank_of_lower_limit(20, 0.95) == (53, "exact")
    d = np.arange(1.0, 11.0) - 3.0
    res = st.signed_rank(d)
    i, j = np.triu_indices(10)
    walsh = np.sort((d[i] + d[j]) / 2)
    assert (res.ci_low, res.ci_high) == (walsh[8], walsh[-9]) and res.hodges_lehmann == np.median(walsh)


def _aa_runs(root, backend="openai"):
    """100 questions: the replicate differs from the baseline on docs 0 and 1, the candidate on 0, 2..10."""
    base = {("t", d, None): True for d in range(100)}
    rep = {k: k[1] not in (0, 1) for k in base}
    cand = {k: not (k[1] == 0 or 2 <= k[1] <= 10) for k in base}
    return (
        write_run(root / "base", "a", base, backend=backend),
        write_run(root / "cand", "b", cand, backend=backend),
        write_run(root / "rep", "a2", rep, backend=backend),
    )


def test_aa_floor_hand_computed(tmp_path, capsys):
    base, cand, rep = _aa_runs(tmp_path)
    report = build_report(load_run(base), load_run(cand), replicate=load_run(rep))
    (row,) = report["aa"]["rows"]
    assert (row["aa_discordant"], row["ab_discordant"], row["only_ab"], row["only_aa"]) == (2, 10, 9, 1)
    assert row["pvalue"] == pytest.approx(11 / 1024)  # P(Bin(10, 1/2) >= 9)
    assert row["midp"] == pytest.approx(11 / 1024 - 0.5 * 10 / 1024)
    assert row["exceeds"] and not report["aa"]["floor_by_construction"]
    assert main(["compare", str(base), str(cand), "--replicate", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "**A/A noise floor**" in out and "one-sided exact conditional McNemar" in out


def test_aa_floor_is_zero_by_construction_on_the_local_engine(tmp_path):
    base, cand, _ = _aa_runs(tmp_path, backend="local")
    report = build_report(load_run(base), load_run(cand))
    assert report["aa"]["floor_by_construction"] and "0 by construction" in render_markdown(report)
    res = st.discordance_excess([False] * 5, [False] * 5)
    assert res.pvalue == 1.0 and not res.exceeds


def test_a_replicate_of_other_questions_is_refused_in_one_line(tmp_path, capsys):
    base, cand, _ = _aa_runs(tmp_path)
    other = write_run(tmp_path / "other", "a2", {("t", d, None): True for d in range(50)})
    assert main(["compare", str(base), str(cand), "--replicate", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--replicate {other}" in err and "different questions" in err


def test_gate_on_the_logprob_measure(lp_runs, tmp_path, capsys):
    base, worse, plain = (str(tmp_path / k) for k in ("b", "w", "p"))
    import shutil

    for src, dst in ((lp_runs["base"], base), (lp_runs["worse"], worse), (lp_runs["plain"], plain)):
        shutil.copytree(src.path, dst)
    # exact match sees nothing (identical rows); the log-probability gate sees the planted loss
    assert main(["compare", base, worse, "--fail-on", "loss"]) == 0
    assert main(["compare", base, worse, "--fail-on", "loss", "--gate-on", "logprob"]) == 1
    out = capsys.readouterr()
    assert "gsm8k gold log-prob" in out.err
    assert main(["compare", base, plain, "--fail-on", "loss", "--gate-on", "both"]) == 2
    assert "no paired gold_logprob to gate on" in capsys.readouterr().err


def test_gold_tokens_as_stored_by_runs_count_as_their_length():
    """Runs store `gold_tokens` as the answer's token ids (local) or strings (server): a list whose
    length is the per-token denominator; a count is accepted too, anything else is not a measure."""
    from evalkit.compare.logprob import _per_token

    assert _per_token({"gold_logprob": -2.0, "gold_tokens": [5, 6, 7, 8]}) == -0.5
    assert _per_token({"gold_logprob": -2.0, "gold_tokens": [" 4", "2"]}) == -1.0
    assert _per_token({"gold_logprob": -2.0, "gold_tokens": 4}) == -0.5
    assert _per_token({"gold_logprob": -2.0, "gold_tokens": []}) is None
    assert _per_token({"gold_logprob": -2.0, "gold_tokens": True}) is None


def test_numerics_floor_names_what_differs_and_tests_departures_against_it(tmp_path):
    """A floor run (the baseline arm under another kernel) departs on docs 0-1, the candidate on docs
    0 and 2-10, all answers right: 9 departures the floor lacks against 1, one-sided exact
    P(Bin(10, 1/2) >= 9) = 11/1024; the note names the kernel switch instead of '0 by construction'."""
    import json

    outcomes = {("t", d, None): True for d in range(40)}
    ids = lambda departs: (
        lambda task, doc, length: {  # noqa: E731
            "generated_ids": [1, 2, 3] + ([9] if doc in departs else [4])
        }
    )
    base = write_run(tmp_path / "base", "fp32", outcomes, backend="local", extra=ids(()))
    floor = write_run(tmp_path / "floor", "fp32", outcomes, backend="local", extra=ids((0, 1)))
    cand = write_run(tmp_path / "cand", "fp16", outcomes, backend="local", extra=ids((0, *range(2, 11))))
    for run, variant in ((base, "stream"), (floor, "split"), (cand, "stream")):
        m = json.loads((run / "manifest.json").read_text())
        m["kernels"] = {"kda_prefill": variant, "label": ""}
        (run / "manifest.json").write_text(json.dumps(m))
    report = build_report(load_run(base), load_run(cand), replicate=load_run(floor))
    aa = report["aa"]
    assert not aa["floor_by_construction"] and aa["floor_differs_in"] == [
        "kernels.kda_prefill 'stream' → 'split'"
    ]
    (row,) = aa["rows"]
    assert row["ab_discordant"] == row["aa_discordant"] == 0  # no answer changes
    dep = row["departures"]
    assert (dep["aa_discordant"], dep["ab_discordant"], dep["only_ab"], dep["only_aa"]) == (2, 10, 9, 1)
    assert dep["pvalue"] == pytest.approx(11 / 1024) and dep["exceeds"]
    text = render_markdown(report)
    assert "Numerics floor: the baseline arm again with kernels.kda_prefill" in text
    assert "0 by construction" not in text and "2 / 10 of 40" in text


def test_numerics_floor_differences_name_store_points_kernels_and_device():
    from evalkit.compare.replicate import numerics_differences
    from evalkit.store import RunData

    def run(chunk, kernels, device):
        manifest = {"arm": {"prefill_chunk_size": chunk}, "kernels": kernels, "backend": {"device": device}}
        return RunData(manifest=manifest, samples=[])

    base = run(2048, {"weights_dtype": "float32"}, "cpu")
    assert numerics_differences(base, run(2048, {"weights_dtype": "float32"}, "cpu")) == []
    assert numerics_differences(base, run(1536, {"weights_dtype": "bfloat16"}, "NVIDIA H200")) == [
        "arm.prefill_chunk_size 2048 → 1536",
        "kernels.weights_dtype 'float32' → 'bfloat16'",
        "device 'cpu' → 'NVIDIA H200'",
    ]
