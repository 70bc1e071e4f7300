"""issue 38: `evalkit ab`: the per-look judgement on planted counts, and the staged run end to end on
a tiny checkpoint (looks at the planned question counts, the n used, a resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalkit.ab.looks import judge_look, look_sizes
from evalkit.cli import main as cli
from evalkit.compare.plan_file import dump_plan
from evalkit.stats.sequential import normal_design


def test_look_sizes_and_judgements_on_planted_counts():
    assert look_sizes(100, 3) == [34, 67, 100]
    design = normal_design((1 / 3, 2 / 3, 1.0))
    loss = judge_look(design, 0, 0, 30, 100, 0.05)  # a 30 pp loss: decided at the first look
    assert loss["decision"] == "loss" and loss["stops"] and 30 >= loss["loss_critical"]
    assert loss["loss_share_repeated_ci"][0] > 0.5
    ni = judge_look(design, 0, 2, 2, 1000, 0.05)
    assert ni["decision"] == "noninferior" and ni["repeated_ci"][0] > -0.05
    early = judge_look(design, 0, 3, 5, 60, 0.05)
    assert early["decision"] == "continue" and not early["stops"]
    last = judge_look(design, 2, 3, 5, 60, 0.05, earlier_discordant=[4, 6])
    assert last["decision"] == "inconclusive" and last["stops"]


def test_a_logprob_gate_decides_on_the_repeated_ci_of_the_mean():
    design = normal_design((0.5, 1.0))
    rng = np.random.default_rng(0)
    small = rng.normal(-0.001, 0.01, 400)  # SE 0.0005: the repeated CI clears -0.01 at the first look
    look = judge_look(design, 0, 3, 5, 60, 0.05, gate="logprob", logprob_diffs=small, logprob_margin=0.01)
    lp = look["logprob"]
    se = small.std(ddof=1) / np.sqrt(small.size)
    assert lp["repeated_ci"][0] == pytest.approx(small.mean() - design.bounds[0] * se)
    assert look["decision"] == "noninferior"  # exact match alone would continue
    both = judge_look(design, 0, 3, 5, 60, 0.05, gate="both", logprob_diffs=small, logprob_margin=0.01)
    assert both["decision"] == "continue"
    bad = rng.normal(-0.05, 0.01, 400)
    assert judge_look(design, 0, 3, 5, 60, 0.05, gate="logprob", logprob_diffs=bad)["decision"] == "futile"
    missing = judge_look(design, 1, 3, 5, 60, 0.05, gate="logprob", logprob_diffs=[], earlier_discordant=[5])
    assert missing["decision"] == "inconclusive"


def _plan(tmp_path, n):
    body = {
        "kind": "evalkit-plan",
        "schema_version": 1,
        "name": "tiny",
        "source": "test",
        "alpha": 0.025,
        "loss_alpha": 0.05,
        "power": 0.8,
        "gate": "exact_match",
        "family": {"procedure": "holm", "size": 1, "p_values": "exact"},
        "floor_ceiling": {"floor": 0.02, "ceiling": 0.98},
        "cells": [
            {
                "task": "passkey",
                "length": 1024,
                "exact_match_margin": "5 pp",
                "logprob_margin": "0.01 nats/token",
                "n": n,
            }
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(dump_plan(body))
    return path


@pytest.mark.slow
def test_ab_runs_the_looks_and_resumes(tiny_hybrid_ckpt, tmp_path, capsys):
    out = tmp_path / "ab"
    argv = ["ab", "--plan", str(_plan(tmp_path, 4)), "--candidate", "bf16", "--looks", "2"]
    argv += ["--model", str(tiny_hybrid_ckpt), "--out", str(out), "--device", "cpu"]
    argv += ["--max-new-tokens", "4", "--no-progress"]
    assert cli(argv) == 0
    summary = json.loads((out / "ab.json").read_text())
    cell = summary["cells"][0]
    assert cell["looks_at"] == [2, 4] and summary["design"]["bounds"][0] > summary["design"]["bounds"][1]
    assert [look["n"] for look in cell["looks"]] == [2, 4][: len(cell["looks"])]
    assert cell["n_used"] == cell["looks"][-1]["n"]
    for arm in ("fp32", "bf16"):
        manifest = json.loads((out / "passkey@1024" / arm / "manifest.json").read_text())
        assert manifest["plan"]["name"] == "tiny" and manifest["ab"]["cell"] == "passkey @ 1024"
    first = (out / "ab.json").read_text()
    capsys.readouterr()
    assert cli(argv) == 0  # resumes: the same questions, the same looks
    assert json.loads((out / "ab.json").read_text())["cells"] == json.loads(first)["cells"]
    assert "passkey @ 1024:" in capsys.readouterr().out


def test_a_plan_without_n_is_refused_before_the_model_loads(tmp_path, capsys):
    rc = cli(
        ["ab", "--plan", str(_plan(tmp_path, None)), "--candidate", "bf16", "--out", str(tmp_path / "x")]
    )
    assert rc == 2 and "cells without a planned n" in capsys.readouterr().err


def test_the_plan_pre_registers_the_design_and_ab_keeps_to_it(tmp_path, capsys):
    from evalkit.compare.plan_file import load_plan

    out = tmp_path / "seq.yaml"
    args = ["plan", "--discordance", "0.1", "--cell", "passkey@1024", "--margin", "0.05", "--looks", "3"]
    assert cli([*args, "--out", str(out)]) == 0
    plan = load_plan(out)
    assert plan.sequential["looks"] == 3 and plan.sequential["information_inflation"] == pytest.approx(
        1.013, abs=2e-3
    )
    assert plan.cells[0].n_max == -(-plan.cells[0].n * plan.sequential["information_inflation"] // 1)
    capsys.readouterr()
    rc = cli(["ab", "--plan", str(out), "--candidate", "bf16", "--looks", "2", "--out", str(tmp_path / "x")])
    assert rc == 2 and "pre-registers 3 looks" in capsys.readouterr().err


class _Stop(Exception):
    pass


def _fake_answers(monkeypatch, calls, stop_after=None, write_before_stop=False):
    """Replace the model with planted answers: the baseline is always right, the candidate never
    (a loss); each call appends the questions up to q to the arm's run directory, as a real run does."""
    from evalkit.ab import runner
    from evalkit.store import RunWriter
    from tests.helpers.runs import manifest, planted_sample

    def answer(spec, cell, arm, q, *args):
        calls.append((arm.label, q))
        stop = stop_after is not None and len(calls) == stop_after
        if stop and not write_before_stop:
            raise _Stop
        start = runner._answered(runner.cell_dir(spec.out_dir, cell) / arm.label)
        w = RunWriter.open(
            runner.cell_dir(spec.out_dir, cell) / arm.label, manifest(arm.label, [cell.task]), durable=False
        )
        for doc in range(start, q):
            w.append(planted_sample(cell.task, doc, cell.length, arm.label == "fp32", "em"))
        w.finish()
        if stop:
            raise _Stop

    monkeypatch.setattr(runner, "_answer", answer)
    monkeypatch.setattr("evalkit.model.loader.load_model", lambda *a, **k: None)
    monkeypatch.setattr("evalkit.sweep.runner.prefill_budget", lambda *a, **k: None)


def _spec(tmp_path, n, block=1):
    from evalkit.ab.runner import AbSpec
    from evalkit.arm import parse_arm
    from evalkit.compare.plan_file import load_plan

    return AbSpec(
        plan=load_plan(_plan(tmp_path, n)),
        baseline=parse_arm("fp32"),
        candidate=parse_arm("bf16"),
        out_dir=tmp_path / "ab",
        model="planted",
        looks=3,
        device="cpu",
        block=block,
        progress=False,
    )


def _docs(path):
    from evalkit.store import load_run

    return sorted(s["doc_id"] for s in load_run(path).samples)


def test_the_arms_alternate_per_question_and_a_stop_leaves_complete_pairs(tmp_path, monkeypatch):
    from evalkit.ab.runner import run_ab

    calls = []
    _fake_answers(monkeypatch, calls, stop_after=7)  # interrupted asking the baseline question 4
    with pytest.raises(_Stop):
        run_ab(_spec(tmp_path, 30))
    assert calls == [
        ("fp32", 1),
        ("bf16", 1),
        ("fp32", 2),
        ("bf16", 2),
        ("fp32", 3),
        ("bf16", 3),
        ("fp32", 4),
    ]
    cell = tmp_path / "ab" / "passkey@1024"
    assert _docs(cell / "fp32") == _docs(cell / "bf16") == [0, 1, 2]  # only complete pairs
    calls.clear()
    _fake_answers(monkeypatch, calls)
    summary = run_ab(_spec(tmp_path, 30))  # resumes at question 4, never asks 1-3 again
    assert calls[:4] == [("fp32", 4), ("bf16", 4), ("fp32", 5), ("bf16", 5)]
    looked = summary["cells"][0]
    # looks at the planned counts 10/20/30; 10 of 10 discordant pairs favour the baseline at the first
    # look (exact p 1/1024 > O'Brien-Fleming's 1e-4 spent), 20 of 20 at the second is a loss
    assert looked["looks_at"] == [10, 20, 30] and [x["n"] for x in looked["looks"]] == [10, 20]
    assert looked["decision"] == "loss" and looked["looks"][0]["loss_critical"] == 11
    assert calls[-1] == ("bf16", 20) and len(calls) == 2 * 17


def test_a_stop_between_the_arms_is_finished_first_on_resume(tmp_path, monkeypatch):
    from evalkit.ab.runner import run_ab

    calls = []
    _fake_answers(monkeypatch, calls, stop_after=5, write_before_stop=True)  # baseline q3 answered
    with pytest.raises(_Stop):
        run_ab(_spec(tmp_path, 30))
    calls.clear()
    _fake_answers(monkeypatch, calls)
    run_ab(_spec(tmp_path, 30))
    assert calls[:3] == [("bf16", 3), ("fp32", 4), ("bf16", 4)]


def test_blocks_alternate_the_arms_and_never_cross_a_look(tmp_path, monkeypatch):
    from evalkit.ab.runner import run_ab

    calls = []
    _fake_answers(monkeypatch, calls, stop_after=3)  # interrupted asking the baseline's second block
    with pytest.raises(_Stop):
        run_ab(_spec(tmp_path, 30, block=4))
    assert calls == [("fp32", 4), ("bf16", 4), ("fp32", 8)]
    calls.clear()
    _fake_answers(monkeypatch, calls)
    summary = run_ab(_spec(tmp_path, 30, block=4))
    # the first look at 10 ends a block early; the decision and n are those of block 1 (above)
    assert calls[:4] == [("fp32", 8), ("bf16", 8), ("fp32", 10), ("bf16", 10)]
    assert calls[4:6] == [("fp32", 14), ("bf16", 14)] and calls[-1] == ("bf16", 20)
    looked = summary["cells"][0]
    assert [x["n"] for x in looked["looks"]] == [10, 20] and looked["decision"] == "loss"
    assert summary["design"]["interleaving"].startswith("per block of 4 questions")


def test_a_block_below_one_is_refused(tmp_path, capsys):
    rc = cli(["ab", "--plan", str(_plan(tmp_path, 4)), "--candidate", "bf16", "--block", "0"]
             + ["--out", str(tmp_path / "x")])  # fmt: skip
    assert rc == 2 and "--block must be at least 1" in capsys.readouterr().err


def test_a_cell_without_room_never_stops_as_noninferior():
    design = normal_design((1 / 3, 2 / 3, 1.0))
    room = judge_look(design, 0, 2, 2, 1000, 0.05)
    assert room["decision"] == "noninferior"
    ceiling = judge_look(design, 0, 2, 2, 1000, 0.05, boundary="cannot_gain")
    assert ceiling["decision"] == "continue" and not ceiling["stops"]
    end = judge_look(design, 2, 2, 2, 1000, 0.05, boundary="cannot_gain", earlier_discordant=[1, 2])
    assert end["decision"] == "ceiling_not_evidence" and end["stops"]
    floor = judge_look(design, 2, 0, 0, 1000, 0.05, boundary="cannot_lose", earlier_discordant=[0, 0])
    assert floor["decision"] == "cannot_lose"
    # a loss at the ceiling is still found and stops the cell
    loss = judge_look(design, 0, 0, 30, 100, 0.05, boundary="cannot_gain")
    assert loss["decision"] == "loss" and loss["stops"]
