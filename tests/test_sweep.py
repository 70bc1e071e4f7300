"""`evalkit sweep` end to end on a tiny checkpoint (the arms the engine has: fp32, fp16, bf16), the
gold log-probability across runs, a resume with another chunk size, and the bits of margin."""

from __future__ import annotations

import json

import pytest

from evalkit.arm import parse_arm
from evalkit.cli import main as cli

COMMON = ["--tasks", "passkey", "--lengths", "1k", "--limit", "2", "--max-new-tokens", "4"]
COMMON += ["--device", "cpu", "--no-progress"]


def _samples(path):
    return {(s["doc_id"], s["length"]): s for s in map(json.loads, (path / "samples.jsonl").open())}


@pytest.fixture(scope="module")
def sweep(tiny_hybrid_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    arms = "fp32,fp16,bf16,bf16@chunk=64"
    argv = ["sweep", "--model", str(tiny_hybrid_ckpt), "--arms", arms, "--out", str(out), *COMMON]
    assert cli(argv) == 0
    return out, argv


def test_the_sweep_writes_a_run_per_arm_and_its_summary(sweep):
    out, _ = sweep
    for label, chunk in (("fp32", 2048), ("fp16", 2048), ("bf16", 2048), ("bf16@chunk=64", 64)):
        manifest = json.loads((out / label / "manifest.json").read_text())
        assert manifest["arm"]["label"] == label and manifest["arm"]["prefill_chunk_size"] == chunk
        rows = manifest["backend"]["batch_invariance"]
        assert (rows["prefill_chunk_size"], rows["prefill_rows"]) == (chunk, 2048)  # one budget
        assert manifest["gold_logprob"] is True and manifest["finished_at"]
        assert len(_samples(out / label)) == 2
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["baseline"] == "fp32" and [a["mantissa_bits"] for a in summary["arms"]] == [23, 10, 7, 7]
    assert {c["arm"] for c in summary["cells"]} == {"fp32", "fp16", "bf16", "bf16@chunk=64"}
    ladder = [r[1] for r in summary["bits_of_margin"]["1024"]["ladder"]]
    assert ladder == ["fp16", "bf16"]  # other chunk sizes are not rungs
    assert set(summary["bits_of_margin"]) == {"1024"}
    assert (out / "sweep.png").stat().st_size > 1000
    assert "| `bf16` | 7 |" in (out / "sweep.md").read_text()


def test_gold_logprob_is_stored_and_separates_bf16_from_fp32(sweep):
    out, _ = sweep
    base, bf16 = _samples(out / "fp32"), _samples(out / "bf16")
    for key, s in base.items():
        assert s["gold_mode"] == "decode" and s["gold_error"] is None
        assert len(s["gold_tokens"]) == len(s["gold_token_logprobs"]) == len(s["gold_margins"]) > 0
        assert s["gold_logprob"] == pytest.approx(sum(s["gold_token_logprobs"]))
        assert s["gold_min_margin"] == min(s["gold_margins"])
        assert s["generated_ids"] and len(s["generated_ids"]) == s["n_generated"]
        assert bf16[key]["gold_tokens"] == s["gold_tokens"]
    assert any(bf16[k]["gold_logprob"] != base[k]["gold_logprob"] for k in base)
    cells = {c["arm"]: c for c in json.loads((out / "sweep.json").read_text())["cells"]}
    assert cells["fp32"]["gold_delta_max_abs"] == 0.0 and cells["fp32"]["generations_departed"] == 0
    assert cells["fp32"]["min_margin_delta_mean"] == 0.0 and cells["fp32"]["margin_sign_changes"] == 0
    assert cells["bf16"]["min_margin_delta_mean"] != 0.0
    assert cells["bf16"]["gold_delta_max_abs"] > 0 and cells["bf16"]["gold_n"] == 2


def test_a_second_fp32_run_gives_exactly_the_same_gold_logprob(sweep, tiny_hybrid_ckpt, tmp_path):
    out, _ = sweep
    again = tmp_path / "fp32-again"
    argv = ["run", "--model", str(tiny_hybrid_ckpt), "--arm", "fp32", "--gold-logprob", "--out", str(again)]
    assert cli([*argv, *COMMON]) == 0
    first, second = _samples(out / "fp32"), _samples(again)
    assert first.keys() == second.keys()
    for key in first:
        for field in ("gold_logprob", "gold_token_logprobs", "gold_margins", "generated_ids"):
            assert second[key][field] == first[key][field]  # exactly: the difference is 0


def test_resuming_with_another_chunk_size_is_refused_naming_the_field(sweep, tiny_hybrid_ckpt, capsys):
    out, _ = sweep
    argv = ["run", "--model", str(tiny_hybrid_ckpt), "--arm", "fp32@chunk=64", "--out", str(out / "fp32")]
    assert cli([*argv, *COMMON]) == 2
    err = capsys.readouterr().err
    assert "arm.prefill_chunk_size is 2048 there but 64 now" in err and err.count("\n") == 1


def test_report_only_summarises_finished_arms_and_refuses_an_unfinished_one(sweep, tmp_path, capsys):
    """--report-only writes the same summary from the arm directories without running anything;
    an arm whose manifest has no finished_at is refused in one line (exit 2)."""
    import shutil

    out, _ = sweep
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "sweep.json").unlink()
    arms = ["--arms", "fp32,fp16,bf16,bf16@chunk=64"]
    assert cli(["sweep", *arms, "--out", str(copy), "--report-only"]) == 0
    want, got = json.loads((out / "sweep.json").read_text()), json.loads((copy / "sweep.json").read_text())
    assert got["cells"] == want["cells"] and got["bits_of_margin"] == want["bits_of_margin"]
    manifest = copy / "bf16" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "finished_at": None}))
    capsys.readouterr()
    assert cli(["sweep", *arms, "--out", str(copy), "--report-only"]) == 2
    err = capsys.readouterr().err
    assert "has not finished: leave bf16 out of --arms" in err and err.count("\n") == 1
    assert cli(["sweep", "--arms", "fp32,fp16", "--out", str(copy), "--report-only"]) == 0


def test_rerunning_the_sweep_resumes(sweep, capsys):
    out, argv = sweep
    before = (out / "fp16" / "samples.jsonl").read_text()
    assert cli(argv) == 0
    assert "0 new samples (2 on disk)" in capsys.readouterr().err
    assert (out / "fp16" / "samples.jsonl").read_text() == before


def test_a_sweep_without_an_fp32_arm_is_refused(capsys, tmp_path):
    assert cli(["sweep", "--arms", "fp16,bf16", "--out", str(tmp_path), "--model", "x"]) == 2
    assert "needs an fp32 arm" in capsys.readouterr().err


def test_bits_of_margin_walks_the_ladder_down_to_the_first_failure():
    from evalkit.sweep.margin import bits_of_margin

    arms = {a: parse_arm(a) for a in ("fp32", "m10", "m7", "m5", "m3", "m2", "bf16-rtz@chunk=64")}
    ok = {"m10": True, "m7": True, "m5": False, "m3": True, "m2": False, "bf16-rtz@chunk=64": False}
    # pooled counts as length_verdicts writes them: 0 losses in 3000 is non-inferior at 5 pp,
    # 200 losses (-6.7 pp) is not; the walk (evalkit.compare.bits) tests them itself
    counts = {
        True: {"baseline_only": 0, "candidate_only": 0},
        False: {"baseline_only": 200, "candidate_only": 0},
    }
    verdicts = {(a, 8192): {"n": 3000, "baseline_right": 1500, **counts[v]} for a, v in ok.items()}
    verdicts[("m10", 32768)] = {"n": 3000, "baseline_right": 1500, **counts[False]}
    got = bits_of_margin(verdicts, arms, "fp32", 0.05)
    # m3 passing below the failing m5 does not count
    assert got["8192"]["fewest_bits"] == 7 and got["8192"]["arm"] == "m7"
    assert got["8192"]["fp16_spare"] == 3 and got["8192"]["bf16_spare"] == 0
    assert [r[1] for r in got["8192"]["ladder"]] == ["m10", "m7", "m5", "m3", "m2"]  # no rtz control
    assert got["32768"]["fewest_bits"] is None and got["32768"]["fp16_spare"] is None


def test_a_sweep_with_no_arm_on_the_ladder_has_no_bits_of_margin():
    """fp32 against store-point and rounding controls only (no fp16/bf16/mN at the baseline's
    store points): nothing to walk, an empty result and a report line saying so, not an error."""
    from evalkit.sweep.margin import bits_of_margin
    from evalkit.sweep.report import render_markdown

    arms = {a: parse_arm(a) for a in ("fp32", "fp16@chunk=64", "bf16-rtz")}
    verdicts = {
        (a, 2048): {"n": 40, "baseline_right": 20, "baseline_only": 1, "candidate_only": 0}
        for a in ("fp16@chunk=64", "bf16-rtz")
    }
    got = bits_of_margin(verdicts, arms, "fp32", 0.05)
    assert got == {}
    assert "no arm on the precision ladder" in render_markdown(
        {"baseline": "fp32", "margin": 0.05, "arms": [], "cells": [], "lengths": [], "bits_of_margin": got}
    )


def test_length_verdicts_pool_the_tasks_one_metric_each():
    from evalkit.stats import noninferiority_test
    from evalkit.sweep.cells import length_verdicts

    def cell(task, metric, n, base_only, cand_only, length=8192):
        return {"arm": "m3", "task": task, "metric": metric, "length": length, "n": n,
                "baseline_only": base_only, "candidate_only": cand_only,
                "baseline_accuracy": 0.5}  # fmt: skip

    cells = [
        cell("passkey", "string_match_all", 64, 1, 0),
        cell("niah_single_1", "string_match_all", 64, 2, 1),
        cell("gsm8k", "exact_match,flexible-extract", 200, 0, 0, None),
        cell("gsm8k", "exact_match,strict-match", 200, 30, 0, None),  # second metric: not pooled
    ]
    got = length_verdicts(cells, 0.05)
    want = noninferiority_test(1, 3, 128, margin=0.05)
    assert got[("m3", 8192)]["n"] == 128 and got[("m3", 8192)]["baseline_only"] == 3
    assert got[("m3", 8192)]["noninferiority_p"] == want.pvalue
    assert got[("m3", None)]["baseline_only"] == 0 and got[("m3", None)]["noninferior"]
    assert got[("m3", 8192)]["baseline_right"] == 64


def test_a_length_where_the_baseline_gets_everything_wrong_shows_no_bits():
    """With fp32 at 0% no arm can lose a question, so 'non-inferior' there is vacuous: the
    ladder must not count it (the v2 model's long answers: all-items exact match 0%)."""
    from evalkit.arm import parse_arms
    from evalkit.sweep.cells import length_verdicts
    from evalkit.sweep.margin import bits_of_margin

    arms = {a.label: a for a in parse_arms("fp32,fp16,m5,m3")}

    def cells(base_acc):
        return [
            {"arm": arm, "task": "copy_list_long", "metric": "item_match_all", "length": 2048, "n": 100,
             "baseline_only": 0, "candidate_only": 0, "baseline_accuracy": base_acc}
            for arm in arms
        ]  # fmt: skip

    empty = bits_of_margin(length_verdicts(cells(0.0), 0.05), arms, "fp32", 0.05)["2048"]
    assert empty["no_room"] and empty["fewest_bits"] is None
    full = bits_of_margin(length_verdicts(cells(0.5), 0.05), arms, "fp32", 0.05)["2048"]
    assert not full["no_room"] and full["fewest_bits"] == 3


def test_a_chunk_far_past_every_prompt_is_named_on_the_cpu_with_the_chunk_that_stores_the_same(
    tiny_hybrid_ckpt,
):
    """The prompts of a length-L cell are at most L tokens (checked on the task itself), so a chunk
    of L rounded up to the default chunk stores once, at the prompt's end, as the larger one does."""
    from transformers import AutoTokenizer

    from evalkit.sweep.runner import oversized_chunk_note
    from evalkit.tasks.registry import get_task

    arms = [parse_arm(a) for a in ("fp32", "fp16", "fp16@chunk=65536")]
    note = oversized_chunk_note(arms, [4096, 8192], "cpu")
    assert "fp16@chunk=65536" in note and "65,536 rows" in note and "chunk of 8,192" in note
    assert oversized_chunk_note(arms, [4096, 8192], "cuda") is None  # the GPU's budget is 16,384 anyway
    assert oversized_chunk_note(arms, None, "cpu") is None  # gsm8k: no lengths to compare with
    assert oversized_chunk_note([parse_arm("fp32"), parse_arm("fp16@chunk=8192")], [8192], "cpu") is None
    tok = AutoTokenizer.from_pretrained(tiny_hybrid_ckpt)
    for task in ("passkey", "niah_single_1"):
        reqs = get_task(task).requests(tokenizer=tok, lengths=[1024], limit=3, show_progress=False)
        assert max(len(tok(r.prompt)["input_ids"]) for r in reqs) <= 1024, task
