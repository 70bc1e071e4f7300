"""Many-prompt drift studies: across-prompt summaries, the A/A floor, verdicts, partial results.

Driven on the one-layer KDA toy of test_drift_driver (fast, real kernels) and, for the floor, on
a tiny transformers-built checkpoint through evalkit's engine.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_drift_driver import TOY

from evalkit.drift.floor import AA_ARM, session_opener
from evalkit.drift.prompts import Prompt, common_length, random_prompts
from evalkit.drift.report import drift_brief, drift_markdown
from evalkit.drift.study import StudyConfig, run_study
from evalkit.drift.teacher_forced import run_teacher_forced

L, CHUNK = 256, 32


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "run"
    prompts = random_prompts(TOY.vocab_size, L, 4, seed=11)
    cfg = StudyConfig(arms=["fp32", "fp16", "bf16"], chunk_size=CHUNK, decode_block=64, fit_starts=(40,))
    summary = run_study(TOY, prompts, cfg, out, show_progress=False, plots=False)
    return out, summary


def test_every_metric_is_summarised_across_prompts(study):
    out, s = study
    rows = json.loads((out / "buckets.json").read_text())
    per = [r for r in _csv(out / "prompt_buckets.csv") if r["mode"] == "decode" and r["arm"] == "fp16"]
    assert {r["prompt"] for r in per} == {"0", "1", "2", "3"}
    kl = [r for r in rows if r["mode"] == "decode" and r["arm"] == "fp16" and r["metric"] == "kl"]
    for r in kl:
        vals = [float(p["mean"]) for p in per if p["metric"] == "kl" and int(p["bucket"]) == r["bucket"]]
        assert r["n_prompts"] == 4 and r["mean"] == pytest.approx(np.mean(vals), rel=1e-9)
        half = r["mean"] - r["ci_low"]
        assert half == pytest.approx(3.182446305 * np.std(vals, ddof=1) / 2, rel=1e-6)  # t(0.975, 3)
        assert r["max_prompts"] == pytest.approx(max(vals))
    prompts = json.loads((out / "prompts.json").read_text())
    assert [p["seed"] for p in prompts] == [11, 12, 13, 14] and all(len(p["sha256"]) == 64 for p in prompts)
    a = s["study"]["decode"]["arms"]["fp16"]
    p99 = [
        float(r["p99_kl"])
        for r in _csv(out / "prompt_results.csv")
        if (r["mode"], r["arm"]) == ("decode", "fp16")
    ]
    assert a["p99_kl"]["mean"] == pytest.approx(np.mean(p99)) and a["max_kl"] >= max(p99)
    assert a["mean_kl"]["n"] == 4 and a["mean_kl"]["ci_low"] < a["mean_kl"]["mean"] < a["mean_kl"]["ci_high"]
    g = a["growth"]["kl"]
    assert set(g) == {"main", "from_40"} and g["main"]["n_prompts"] == 4 and len(g["main"]["slopes"]) == 4
    assert g["main"]["mean"] == pytest.approx(np.mean(g["main"]["slopes"]))


def test_identical_fp32_is_exactly_zero_and_the_floor_is_not(study):
    _, s = study
    for mode in ("prefill", "decode"):
        arms = s["study"][mode]["arms"]
        assert arms["fp32"]["mean_kl"]["max"] == 0.0 and arms["fp32"]["state_rel_err_end"]["max"] == 0.0
        assert arms["fp32"]["growth"]["kl"]["main"]["verdict"] == "zero"
    # cutting the blocks elsewhere changes the CPU prefill's chunking and the batch shapes of the
    # matmuls: a floor of last-bit noise (0 where the BLAS happens to agree), far below fp16's
    for mode in ("prefill", "decode"):
        arms = s["study"][mode]["arms"]
        assert 0 <= arms[AA_ARM]["mean_kl"]["max"] < 1e-3 * arms["fp16"]["mean_kl"]["min"]
        fl = arms["fp16"]["floor"]["kl_last_bucket"]
        assert fl["den_zero"] == 4 or fl["ratio"] > 1e3


def test_verdicts_are_pasteable_sentences(study):
    out, s = study
    v = {(x["mode"], x["arm"]): x for x in s["verdicts"]}
    pre = v["prefill", "fp16"]["text"]
    assert pre.startswith("prefill mode: KL(fp32‖fp16) per token ")
    assert "(95% CI " in pre and "over [" in pre and "across 4 prompts" in pre
    assert "the A/A floor" in pre and "Sensitivity (fit start): from_40 L^" in pre
    assert any("only 4 prompts" in c for c in v["prefill", "fp16"]["caveats"])
    md = drift_markdown(out)
    assert "### Verdicts" in md and "CAVEAT: only 4 prompts" in md and "| fp32-aa |" in md
    brief = drift_brief(out)
    assert brief["prefill"]["arms"]["bf16"]["kl_exponent"]["main"]["n_prompts"] == 4


def test_the_floor_dominating_is_a_caveat():
    from evalkit.drift.verdict import verdicts

    g = {"main": {"start": 64, "stop": 4096, "verdict": "grows", "mean": 0.3, "ci_low": 0.2, "ci_high": 0.4}}
    g["main"].update(metric="kl", n_prompts=16, n_zero=0, n_insufficient=0, sd=0.2)
    flat_state = {"main": {**g["main"], "metric": "state_rel_fro", "verdict": "insufficient"}}
    overall = {"n": 16, "ratio": 1.1, "ci_low": 1.0, "ci_high": 1.2, "den_zero": 0}
    floor = {
        "kl_last_bucket": {**overall, "ratio": 1.2, "ci_low": 1.0, "ci_high": 1.4, "floor_mean": 1e-5},
        "kl_overall": overall,
    }
    s = {
        "study": {
            "decode": {
                "length": 4096,
                "n_prompts": 16,
                "arms": {"bf16": {"growth": {"kl": g, "state_rel_fro": flat_state}, "floor": floor}},
            }
        }
    }
    (out,) = verdicts(s)
    assert "1.2× the A/A floor at 4k (95% CI 1× to 1.4×)" in out["text"]
    s["study"]["decode"]["last_bucket"] = [2896, 4096]  # the sentence names where "at 4k" was read
    assert "1.2× the A/A floor at 4k (positions 2.8k–4k; 95% CI 1× to 1.4×)" in verdicts(s)[0]["text"]
    del s["study"]["decode"]["last_bucket"]
    (dominates,) = [c for c in out["caveats"] if c.startswith("the A/A floor dominates")]
    assert "rerun with fp32 weights" in dominates  # no weights dtype recorded: the bf16 advice
    s["config"] = {"model": {"dtype": "float32"}}  # fp32 weights already: no advice to use them
    (dominates,) = [c for c in verdicts(s)[0]["caveats"] if c.startswith("the A/A floor dominates")]
    assert "fp32 reassociation" in dominates and "rerun" not in dominates
    floor["kl_last_bucket"].update(ratio=50.0, ci_low=2.0, ci_high=900.0)
    (c,) = verdicts(s)[0]["caveats"]
    assert c.startswith("the ratio to the A/A floor at 4k is uncertain (95% CI down to 2×)")
    floor["kl_last_bucket"].update(ratio=50.0, ci_low=40.0, ci_high=60.0)
    assert not verdicts(s)[0]["caveats"]


def test_a_budget_stops_between_prompts_and_says_so(tmp_path):
    prompts = random_prompts(TOY.vocab_size, 128, 3, seed=0)
    cfg = StudyConfig(arms=["fp16"], modes=["prefill"], chunk_size=32)
    s = run_study(
        TOY, prompts, cfg, tmp_path / "r", show_progress=False, plots=False, budgets={"prefill": 0.0}
    )
    st = s["study"]["prefill"]
    assert st["n_prompts"] == 1 and st["stopped_by_budget"]  # the first prompt always runs, whole
    assert any("stopped by its time budget" in c for v in s["verdicts"] for c in v["caveats"])


def test_prompts_are_cut_to_a_common_length():
    ps = common_length([Prompt([1] * 10, {}), Prompt([2] * 7, {"a": 1})])
    assert (
        [len(p.ids) for p in ps] == [7, 7] and ps[0].info["cut_from"] == 10 and "cut_from" not in ps[1].info
    )


def test_on_the_engine_identical_fp32_is_zero_and_the_floor_is_positive(tiny_hybrid_ckpt):
    """The engine's dense layers on other batch shapes: a floor far below fp16's but not 0."""
    from evalkit.backends.local_probe import EngineDriftModel

    model = EngineDriftModel.load(str(tiny_hybrid_ckpt), device="cpu", max_len=256, chunk_size=64)
    toks = torch.tensor(random_prompts(model.vocab_size, 160, 1, seed=3)[0].ids)
    for mode in ("prefill", "decode"):  # blocks of 64 cut 8 + 56: other matmul shapes
        res = run_teacher_forced(
            model, toks, ["fp32", AA_ARM, "fp16"], mode, chunk_size=64, decode_block=64,
            open_session=session_opener(model),
        )  # fmt: skip
        kl = {a: res.traces[a].buckets["kl"] for a in res.traces}
        assert kl["fp32"].maximum.max() == 0.0 and all(r["rel_fro"] == 0.0 for r in res.traces["fp32"].states)
        floor = kl[AA_ARM].total.sum() / kl[AA_ARM].count.sum()
        fp16 = kl["fp16"].total.sum() / kl["fp16"].count.sum()
        assert 0 < floor < fp16 / 100, (mode, floor, fp16)


def _csv(path):
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


def test_prefill_within_one_chunk_is_refused(tmp_path):
    from evalkit.errors import InputError

    prompts = random_prompts(TOY.vocab_size, 64, 2, seed=0)
    with pytest.raises(InputError, match="longer than one chunk"):
        run_study(TOY, prompts, StudyConfig(arms=["fp16"], chunk_size=64), tmp_path / "r", plots=False)


def test_campaign_estimates_scale_with_prompts_length_and_sessions():
    from evalkit.drift.campaign import Part, estimate_seconds, kimi_48b_raw

    ref = Part("ref", "bf16", 65536, 16, 2048)
    e = estimate_seconds(ref, ["fp16", "bf16"])
    # 4 sessions (fp32, fp16, bf16, A/A) x 65536 tokens at the H200 throughputs, per prompt
    assert e["decode"] == pytest.approx(16 * (4 * 65536 / 26_000 + 0.5))
    assert e["total"] == pytest.approx(e["prefill"] + e["decode"] + 20.0)
    longer = estimate_seconds(Part("ref", "bf16", 131072, 16, 2048), ["fp16", "bf16"])
    assert longer["decode"] > 1.9 * e["decode"]
    assert estimate_seconds(Part("48b", "bf16", 4096, 8, 512, 27), ["fp16"])["total"] > 0
    raw = kimi_48b_raw(4, smoke=True)
    assert raw["num_hidden_layers"] == 4 and raw["hidden_size"] == 64


def _without_timings(summary: dict) -> dict:
    s = json.loads(json.dumps(summary, default=str))
    for mode in s["study"].values():
        mode.pop("seconds_per_prompt", None)
        mode.pop("stopped_by_budget", None)
    return s


def test_a_stopped_study_resumes_to_the_uninterrupted_summary(study, tmp_path):
    """Two prompts, then --resume with all four: the finished prompts are not run again and the
    summary and per-prompt files equal the uninterrupted run's (the `study` fixture)."""
    full_out, full = study
    prompts = random_prompts(TOY.vocab_size, L, 4, seed=11)
    cfg = StudyConfig(arms=["fp32", "fp16", "bf16"], chunk_size=CHUNK, decode_block=64, fit_starts=(40,))
    out = tmp_path / "run"
    run_study(TOY, prompts[:2], cfg, out, show_progress=False, plots=False)
    ran = []
    on_prompt = lambda m, i: ran.append((m, i))  # noqa: E731
    kw = dict(show_progress=False, plots=False, resume=True, on_prompt=on_prompt)
    resumed = run_study(TOY, prompts, cfg, out, **kw)
    assert ran == [("prefill", 2), ("prefill", 3), ("decode", 2), ("decode", 3)]
    (resume,) = json.loads((out / "manifest.json").read_text())["resumes"]  # recorded as the run store does
    assert resume["samples_on_disk"] == 4  # two prompts of each mode
    assert _without_timings(resumed) == _without_timings(full)
    for name in ("buckets.json", "states.json"):
        assert json.loads((out / name).read_text()) == json.loads((full_out / name).read_text()), name
    assert (out / "prompt_buckets.csv").read_text() == (full_out / "prompt_buckets.csv").read_text()


def test_resume_refuses_another_configuration_or_other_prompts(tmp_path):
    from evalkit.errors import InputError, MismatchError

    prompts = random_prompts(TOY.vocab_size, L, 2, seed=11)
    cfg = StudyConfig(arms=["fp32", "fp16"], chunk_size=CHUNK, decode_block=64, modes=["prefill"])
    out = tmp_path / "run"
    run_study(TOY, prompts[:1], cfg, out, show_progress=False, plots=False)
    other = StudyConfig(arms=["fp32", "bf16"], chunk_size=CHUNK, decode_block=64, modes=["prefill"])
    with pytest.raises(
        MismatchError, match=r"drift\.arms is \['fp32', 'fp16'\] there but \['fp32', 'bf16'\] now"
    ):
        run_study(TOY, prompts, other, out, show_progress=False, plots=False, resume=True)
    with pytest.raises(InputError, match="prompts differ"):
        others = random_prompts(TOY.vocab_size, L, 2, seed=99)
        run_study(TOY, others, cfg, out, show_progress=False, plots=False, resume=True)
    with pytest.raises(InputError, match="already holds a run"):
        run_study(TOY, prompts, cfg, out, show_progress=False, plots=False)


def test_a_saved_study_refits_to_the_summary_its_run_wrote(study, tmp_path, capsys):
    """`evalkit drift --report-only`: the stored rows alone give back every figure (no model)."""
    import shutil

    from evalkit.cli import main as cli_main
    from evalkit.drift.refit import refit_study, refitted
    from evalkit.errors import InputError

    out, s = study
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    stale = json.loads((copy / "summary.json").read_text())
    stale["study"], stale["verdicts"] = {}, []
    (copy / "summary.json").write_text(json.dumps(stale))
    new = refit_study(copy, plots=False)
    assert json.dumps(new["study"], sort_keys=True) == json.dumps(s["study"], sort_keys=True)
    assert new["verdicts"] == s["verdicts"]
    assert json.loads((copy / "summary.json").read_text())["verdicts"] == s["verdicts"]
    assert "slope:kl:main" in (copy / "prompt_results.csv").read_text().splitlines()[0]
    assert cli_main(["drift", "--report-only", str(copy), "--no-plots"]) == 0
    assert "drift vs the fp32 arm" in capsys.readouterr().out
    with open(copy / "samples.jsonl", "a") as f:
        f.write('{"mode": "prefill", "bucket_rows": [')  # cut short by a kill
    with pytest.raises(InputError, match="truncated last line"):  # a reader refuses it
        refitted(copy)
    assert cli_main(["drift", "--report-only", str(copy), "--no-plots"]) == 0  # a refit drops it
    assert "dropped a truncated last line" in capsys.readouterr().err
    assert json.loads((copy / "summary.json").read_text())["verdicts"] == s["verdicts"]
    (copy / "samples.jsonl").unlink()
    assert cli_main(["drift", "--report-only", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no samples.jsonl" in err[0]


def test_a_second_study_into_a_directory_being_written_is_refused(tmp_path):
    """One writer per drift run directory (issue 43, item 4): the run store's lock."""
    from evalkit.errors import InputError

    prompts = random_prompts(TOY.vocab_size, 96, 1, seed=5)
    cfg = StudyConfig(arms=["fp16"], modes=["decode"], chunk_size=CHUNK, decode_block=64, floor=False)
    refused = []

    def second_writer(mode, i):
        with pytest.raises(InputError, match="being written by another evalkit process") as info:
            run_study(TOY, prompts, cfg, tmp_path / "r", show_progress=False, plots=False, resume=True)
        refused.append(str(info.value))

    run_study(TOY, prompts, cfg, tmp_path / "r", show_progress=False, plots=False, on_prompt=second_writer)
    assert len(refused) == 1
    run_study(
        TOY, prompts, cfg, tmp_path / "r", show_progress=False, plots=False, resume=True
    )  # lock released


def test_a_link_planted_in_a_drift_run_directory_is_refused(tmp_path):
    """Issue 43, item 2, for drift's directory: a planted buckets.csv link is not written through."""
    from evalkit.errors import InputError

    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    run = tmp_path / "r"
    run.mkdir()
    (run / "buckets.csv").symlink_to(victim)
    prompts = random_prompts(TOY.vocab_size, 96, 1, seed=5)
    cfg = StudyConfig(arms=["fp16"], modes=["decode"], chunk_size=CHUNK, decode_block=64, floor=False)
    with pytest.raises(InputError, match=r"buckets\.csv is a symbolic link"):
        run_study(TOY, prompts, cfg, run, show_progress=False, plots=False)
    assert victim.read_text() == "keep\n"


def test_a_resume_repairs_a_torn_row_and_skips_the_finished_prompts(tmp_path, capsys):
    """The run store's resume for drift's rows: a line cut by a kill is dropped with a notice and
    its prompt measured again; a finished prompt is not; the rows read back whole."""
    from evalkit.drift import rows

    prompts = random_prompts(TOY.vocab_size, 96, 3, seed=5)
    cfg = StudyConfig(arms=["fp16"], modes=["decode"], chunk_size=CHUNK, decode_block=64, floor=False)
    out = tmp_path / "r"
    run_study(TOY, prompts[:2], cfg, out, show_progress=False, plots=False)
    lines = (out / "samples.jsonl").read_bytes().splitlines(keepends=True)
    (out / "samples.jsonl").write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])  # prompt 1 torn
    ran = []
    kw = dict(show_progress=False, plots=False, resume=True, on_prompt=lambda m, i: ran.append(i))
    s = run_study(TOY, prompts, cfg, out, **kw)
    assert ran == [1, 2] and "dropped a truncated last line" in capsys.readouterr().err
    saved, hashes = rows.read(out)
    assert sorted(hashes) == [0, 1, 2] and s["study"]["decode"]["n_prompts"] == 3
    assert sorted({r["prompt"] for r in saved["decode"]["prompt_rows"]}) == [0, 1, 2]
