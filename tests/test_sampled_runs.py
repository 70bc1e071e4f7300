"""Sampled runs end to end on the CPU with the embedded reference model (issue 38, item 7):
`evalkit run --temperature 0.7 --samples-per-question 3` keys samples by (question, j); the
randomness is coupled (the same seed gives the same samples in another run and through
`evalkit serve`, another seed other samples); a killed run resumes per sample; the sampling is
the run's identity; compare pairs by (question, sample) and reports the clustered analysis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.cli import main as cli
from evalkit.reference_model import default_model_path, has_reference_model

pytestmark = pytest.mark.skipif(not has_reference_model(), reason="the reference model's weights are absent")

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["--tasks", "kv_recite", "--lengths", "512", "--limit", "4", "--max-new-tokens", "48"]
SAMPLED = ["--temperature", "0.7", "--samples-per-question", "3"]


def _run(out, arm="fp32", *extra):
    args = ["run", "--arm", arm, "--device", "cpu", "--no-progress", "--out", str(out), *QUESTIONS]
    return cli([*args, *SAMPLED, *extra])


def _samples(run):
    lines = (Path(run) / "samples.jsonl").read_text().splitlines()
    return {(s["doc_id"], s["sample"]): s for s in map(json.loads, lines)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampled")
    for name, arm, extra in [
        ("a", "fp32", []),
        ("a2", "fp32", []),
        ("h", "fp16", []),
        ("s5", "fp32", ["--sampling-seed", "5"]),
    ]:
        assert _run(root / name, arm, *extra) == 0
    return root


def test_samples_are_keyed_by_question_and_sample_and_the_manifest_says_how(runs):
    got = _samples(runs / "a")
    assert sorted(got) == [(d, j) for d in range(4) for j in range(3)]
    manifest = json.loads((runs / "a" / "manifest.json").read_text())
    assert manifest["sampling"] == {
        "temperature": 0.7, "top_p": 1.0, "top_k": 0, "samples_per_question": 3, "seed": 0,
        "coupling": "coupled",
    }  # fmt: skip


def test_the_randomness_is_coupled(runs):
    a, again, fp16, other = (_samples(runs / n) for n in ("a", "a2", "h", "s5"))
    assert all(a[k]["generated_ids"] == again[k]["generated_ids"] for k in a)  # same seed: same samples
    assert any(a[k]["generated_ids"] != other[k]["generated_ids"] for k in a)  # another seed: others
    # fp16 state, same random numbers: the samples pair up token for token where the logits agree
    same = sum(a[k]["generated_ids"] == fp16[k]["generated_ids"] for k in a)
    assert same >= len(a) // 2


def test_a_killed_run_resumes_per_sample(runs, tmp_path):
    out = tmp_path / "killed"
    assert _run(out) == 0
    lines = (out / "samples.jsonl").read_text().splitlines()
    (out / "samples.jsonl").write_text("\n".join(lines[:5]) + "\n")  # as if killed after 5 samples
    assert _run(out) == 0
    resumed, full = _samples(out), _samples(runs / "a")
    assert len((out / "samples.jsonl").read_text().splitlines()) == 12
    assert {k: s["generated_ids"] for k, s in resumed.items()} == {
        k: s["generated_ids"] for k, s in full.items()
    }


@pytest.mark.parametrize(
    "change, field",
    [(["--temperature", "0.9"], "sampling.temperature"),
     (["--samples-per-question", "2"], "sampling.samples_per_question"),
     (["--sampling-seed", "1"], "sampling.seed")],
)  # fmt: skip
def test_changing_the_sampling_on_resume_is_refused_in_one_line(runs, tmp_path, capsys, change, field):
    out = tmp_path / "run"
    (out).mkdir()
    for name in ("manifest.json", "samples.jsonl"):
        (out / name).write_text((runs / "a" / name).read_text())
    args = ["run", "--arm", "fp32", "--device", "cpu", "--no-progress", "--out", str(out), *QUESTIONS]
    rest = dict(zip(SAMPLED[::2], SAMPLED[1::2]))
    rest.update(dict(zip(change[::2], change[1::2])))
    capsys.readouterr()
    assert cli([*args, *[x for kv in rest.items() for x in kv]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_sampling_options_without_a_temperature_are_refused(capsys, tmp_path):
    assert cli(["run", "--arm", "fp32", "--out", str(tmp_path / "x"), "--samples-per-question", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--temperature" in err


def test_compare_reports_the_clustered_analysis(runs, tmp_path, capsys):
    capsys.readouterr()
    assert cli(["compare", str(runs / "a"), str(runs / "h"), "--format", "json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)  # strict JSON: no nan
    assert report["sampling"]["coupling"] == "coupled"
    (row,) = report["clustered"]
    assert (row["n_clusters"], row["k_min"], row["k_max"], row["n_pairs"]) == (4, 3, 3, 12)
    assert row["margin"] == 0.01 and row["ni_pvalue"] is not None
    assert cli(["compare", str(runs / "a"), str(runs / "h"), "--format", "md"]) in (0, 1)
    md = capsys.readouterr().out
    assert "Sampled runs, clustered by question" in md and "k = 3 samples per question" in md
    assert cli(["compare", str(runs / "a"), str(runs / "s5"), "--format", "md"]) in (0, 1)
    assert "uncoupled — different sampling seeds (0 vs 5)" in capsys.readouterr().out


def test_greedy_stays_as_it_was_and_is_not_paired_with_sampled(runs, tmp_path, capsys):
    greedy = tmp_path / "greedy"
    args = ["run", "--arm", "fp32", "--device", "cpu", "--no-progress", "--out", str(greedy), *QUESTIONS]
    assert cli(args) == 0
    lines = [json.loads(x) for x in (greedy / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and all("sample" not in s for s in lines)
    assert "sampling" not in json.loads((greedy / "manifest.json").read_text())
    capsys.readouterr()
    assert cli(["compare", str(greedy), str(runs / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "greedy" in err


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`evalkit serve` of the reference model (fp32) in a subprocess; yields its URL."""
    port_file = tmp_path_factory.mktemp("serve") / "port"
    cmd = [sys.executable, "-m", "evalkit", "serve", "--arm", "fp32", "--device", "cpu", "--port", "0",
           "--port-file", str(port_file)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 180
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"evalkit serve did not start: {proc.stdout.read()[-2000:]}")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        proc.kill()
        proc.wait()


def test_a_served_arm_sends_the_seed_and_is_coupled_with_the_local_one(runs, served, tmp_path):
    out = tmp_path / "remote"
    model = str(default_model_path())
    args = [
        "run",
        "--server",
        served,
        "--model",
        model,
        "--arm",
        "serve-fp32",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert cli([*args, *QUESTIONS, *SAMPLED]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sampling"]["coupling"] == "coupled"
    remote, local = _samples(out), _samples(runs / "a")
    assert {k: s["response"] for k, s in remote.items()} == {k: s["response"] for k, s in local.items()}


def test_another_server_gets_each_samples_seed_and_is_stated_uncoupled():
    """A server that is not `evalkit serve` gets the temperature, truncation and the sample's own
    seed in the body; the run says its randomness is uncoupled (pairing by question only)."""
    from helpers.faulty_server import FaultyServer

    from evalkit.backends.base import UNCOUPLED, GenRequest
    from evalkit.backends.openai_remote import OpenAIBackend
    from evalkit.runner.execute import coupling
    from evalkit.runner.sampling import SamplingSpec

    spec = SamplingSpec(temperature=0.7, top_p=0.9, top_k=20, samples=2, seed=3)
    one, two = spec.request("t", [5], None, 0), spec.request("t", [5], None, 1)
    assert one.seed != two.seed and one == spec.request("t", [5], None, 0) and 0 <= one.seed < 2**63
    with FaultyServer(lambda k, a: "ok") as srv:
        backend = OpenAIBackend([srv.url], model="faulty-model", concurrency=1, max_retries=0)
        backend.generate([GenRequest(prompt="Q: 1", max_new_tokens=4, sampling=one)], lambda i, r: None)
        body = srv.bodies[-1]
        assert coupling(backend) == UNCOUPLED
    assert (body["temperature"], body["top_p"], body["top_k"], body["seed"]) == (0.7, 0.9, 20, one.seed)


def test_the_clustered_ni_uses_the_margin_and_a_plan_is_refused_for_k_above_one(runs, tmp_path, capsys):
    """The clustered NI is at the compare's margin; a plan's decision (exact tests on one answer per
    question) is refused for k = 3 samples per question in one line, exit 2."""
    cli(["compare", str(runs / "a"), str(runs / "h"), "--margin", "0.05", "--format", "json"])
    (row,) = json.loads(capsys.readouterr().out)["clustered"]
    assert (row["margin"], row["ni_alpha"]) == (0.05, 0.025)
    plan = tmp_path / "plan.yaml"
    args = ["plan", "--discordance", "0.1", "--cell", "kv_recite@512", "--margin", "0.05", "--out", str(plan)]
    assert cli(args) == 0
    capsys.readouterr()
    assert cli(["compare", str(runs / "a"), str(runs / "h"), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--samples-per-question 1" in err[0]


def test_with_k_above_one_the_rows_verdicts_and_the_gate_come_from_the_clustered_analysis():
    """A per-sample row that reads "loss" (the k correlated samples counted as independent pairs)
    takes its clustered analysis's verdict, so the gate passes or fails on the clustered one."""
    from evalkit.compare.clustered import apply_clustered_verdicts
    from evalkit.compare.gate import evaluate_gate
    from evalkit.compare.verdict import INCONCLUSIVE, LOSS

    row = {"task": "t", "metric": "m", "length": None, "verdict": LOSS, "noninferior": False,
           "verdict_text": "loss"}  # fmt: skip
    clustered = {"task": "t", "metric": "m", "length": None, "verdict": INCONCLUSIVE, "noninferior": False,
                 "estimate": -0.1, "ci_low": -0.3, "ci_high": 0.1, "pvalue": 0.2, "ni_pvalue": 0.4,
                 "margin": 0.05, "n_clusters": 10, "k_min": 3, "k_max": 3}  # fmt: skip
    rows = [dict(row)]
    assert evaluate_gate(rows, "loss")["status"] == "fail"
    apply_clustered_verdicts(rows, [clustered])
    assert rows[0]["verdict"] == INCONCLUSIVE and "Durkalski" in rows[0]["verdict_text"]
    assert evaluate_gate(rows, "loss")["status"] == "pass"
    assert evaluate_gate(rows, "inconclusive")["status"] == "fail"
    one_question = [dict(row)]
    apply_clustered_verdicts(one_question, [{"task": "t", "metric": "m", "length": None, "note": "one"}])
    assert one_question[0]["verdict"] == INCONCLUSIVE


def test_the_sample_index_is_part_of_the_key_and_checked():
    from evalkit.store.schema import SampleError, normalise_sample, question_key, sample_key

    line = {"task": "t", "doc_id": 3, "length": None, "prompt_hash": "h", "target": "", "response": "",
            "correct": {"m": True}, "error": None}  # fmt: skip
    assert sample_key(line) == question_key("t", 3, None) == ("t", "3", None)  # greedy: as before
    assert sample_key({**line, "sample": 2}) == ("t", "3", None, 2)
    for bad in (-1, "1", True):
        with pytest.raises(SampleError, match="sample"):
            normalise_sample({**line, "sample": bad})


def test_the_clustered_verdict_follows_durkalski_and_the_clustered_ni():
    import numpy as np

    from evalkit.compare.clustered import clustered_verdict
    from evalkit.stats import clustered_paired

    ids = np.repeat(np.arange(30), 3)
    right = np.ones(90, dtype=bool)
    worse = right.copy()
    worse[::3] = False  # the candidate loses one sample of every question
    loss = clustered_paired(worse, right, ids, margin=0.01)
    assert clustered_verdict(loss, 30) == "loss"
    assert clustered_verdict(clustered_paired(right, worse, ids, margin=0.01), 30) == "gain"
    same = clustered_paired(right, right, ids, margin=0.01)
    assert clustered_verdict(same, 0) == "identical"
    rng = np.random.default_rng(0)
    a, b = rng.random(90) < 0.5, rng.random(90) < 0.5
    noisy = clustered_paired(a, b, ids, margin=0.01)
    assert noisy.pvalue > 0.05 and clustered_verdict(noisy, int(np.sum(a != b))) == "inconclusive"
