"""issue 38: `evalkit plan --out` and `evalkit compare --plan` on held-out synthetic runs with
planted outcomes: per-cell verdicts (intersection-union over the cells with room), floor and
ceiling cells as no evidence, Holm over the declared family or a fixed sequence on exact
p-values, the report's decision line, and bad plans refused with exit 2."""

import json

import pytest
import yaml

from evalkit import stats as st
from evalkit.cli import main
from evalkit.compare.plan_file import content_hash, dump_plan, load_plan
from evalkit.errors import InputError
from evalkit.store import RunWriter
from tests.helpers.runs import manifest, planted_sample


def _write(path, arm, cells, plan_identity=None):
    """cells: {(task, length): (both_right, base_only, cand_only, both_wrong)}."""
    tasks = sorted({t for t, _ in cells})
    man = manifest(arm, tasks)
    if plan_identity is not None:
        man["plan"] = plan_identity
    w = RunWriter.open(path, man, durable=False)
    for (task, length), (both, b_only, c_only, neither) in cells.items():
        pattern = [(1, 1)] * both + [(1, 0)] * b_only + [(0, 1)] * c_only + [(0, 0)] * neither
        for doc, (base_right, cand_right) in enumerate(pattern):
            right = base_right if arm == "base" else cand_right
            w.append(planted_sample(task, doc, length, bool(right), "em"))
    w.finish()
    return path


def _pair(root, cells, plan_identity=None):
    root.mkdir(parents=True, exist_ok=True)
    return (
        _write(root / "base", "base", cells, plan_identity),
        _write(root / "cand", "cand", cells, plan_identity),
    )


def _plan_body(cells, *, margin_pp=2, gate="exact_match", family_size=None, name="p", order=None):
    family = {"procedure": "holm", "size": family_size or len(cells), "p_values": "exact"}
    if order is not None:
        family.update(procedure="fixed-sequence", order=order)
    return {
        "kind": "evalkit-plan",
        "schema_version": 1,
        "name": name,
        "source": "test",
        "alpha": 0.025,
        "loss_alpha": 0.05,
        "power": 0.8,
        "gate": gate,
        "family": family,
        "floor_ceiling": {"floor": 0.02, "ceiling": 0.98},
        "cells": [
            {
                "task": t,
                "length": length,
                "exact_match_margin": f"{margin_pp} pp",
                "logprob_margin": "0.01 nats/token",
                "n": None,
            }
            for t, length in cells
        ],
    }


def _plan(tmp_path, cells, name="plan.yaml", **kw):
    path = tmp_path / name
    path.write_text(dump_plan(_plan_body(cells, **kw)), encoding="utf-8")
    return path


def _compare(capsys, base, cand, *args):
    rc = main(["compare", str(base), str(cand), "--format", "json", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


# a gain on gsm8k (+8 pp) and a loss on niah @ 4096 (-6 pp), baselines well inside (2%, 98%)
GAIN_LOSS = {("gsm8k", None): (300, 5, 45, 150), ("niah", 4096): (300, 40, 10, 150)}


def test_a_gain_in_one_cell_cannot_offset_a_loss_in_another(tmp_path, capsys):
    base, cand = _pair(tmp_path / "runs", GAIN_LOSS)
    # pooled, the candidate is non-inferior at 2 pp (it gains overall) ...
    pooled = st.noninferiority_test(45 + 10, 5 + 40, 1000, margin=0.02)
    assert pooled.noninferior
    # ... but the plan judges each cell, and niah lost
    rc, report, err = _compare(capsys, base, cand, "--plan", _plan(tmp_path, GAIN_LOSS))
    decision = report["decision"]
    assert rc == 1 and decision["outcome"] == "fail" and report["status"] == "fail"
    verdicts = {c["task"]: c["verdict"] for c in decision["cells"]}
    assert verdicts == {"gsm8k": "noninferior", "niah": "loss"}
    assert decision["failing"] == ["niah @ 4096"]
    assert decision["pooled"]["cells_with_losses"] == ["niah @ 4096"]
    assert decision["pooled"]["cells_with_gains"] == ["gsm8k"]
    assert "the plan" in err and "niah @ 4096" in err


def test_a_cell_at_0_percent_is_no_evidence_and_is_left_out(tmp_path, capsys):
    cells = {("gsm8k", None): (700, 3, 3, 294), ("passkey", 4096): (0, 0, 0, 2000)}
    base, cand = _pair(tmp_path / "runs", cells)
    # without the plan, the 0% cell reads as non-inferior agreement
    rc, report, _ = _compare(capsys, base, cand, "--margin", "0.02")
    passkey = next(r for r in report["rows"] if r["task"] == "passkey")
    assert passkey["noninferior"] and not report["decision"]["preregistered"]
    rc, report, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells))
    decision = report["decision"]
    verdicts = {c["task"]: c["verdict"] for c in decision["cells"]}
    assert verdicts == {"gsm8k": "noninferior", "passkey": "cannot_lose"}
    # the decision is the intersection over the one cell with room, and says what it left out
    assert rc == 0 and decision["outcome"] == "pass" and decision["cells_with_room"] == 1
    assert decision["excluded"]["cannot_lose"] == ["passkey @ 4096"]
    assert "PASS: the one cell with room is non-inferior" in decision["line"]
    assert "1 cell excluded (cannot lose (floor): passkey @ 4096)" in decision["line"]


def test_a_plan_whose_cells_are_all_at_floor_or_ceiling_cannot_pass(tmp_path, capsys):
    cells = {("niah", 4096): (995, 0, 0, 5), ("passkey", 4096): (0, 0, 0, 2000)}
    base, cand = _pair(tmp_path / "runs", cells)
    rc, report, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells))
    decision = report["decision"]
    # each cell alone would be shown non-inferior at 2 pp: agreement, and n = 1000 / 2000
    assert all(r["noninferior"] for r in report["rows"])
    verdicts = {c["task"]: c["verdict"] for c in decision["cells"]}
    assert verdicts == {"niah": "ceiling_not_evidence", "passkey": "cannot_lose"}
    assert rc == 1 and decision["outcome"] == "fail" and decision["cells_with_room"] == 0
    assert "no cell has room (2 cells excluded" in decision["line"]
    assert sorted(decision["failing"]) == ["niah @ 4096", "passkey @ 4096"]


def test_a_loss_at_the_ceiling_still_fails_and_stays_visible(tmp_path, capsys):
    # baseline 99%; the candidate loses 12 of those questions and gains none: exact p 0.0005
    cells = {("gsm8k", None): (700, 3, 3, 294), ("niah", 4096): (978, 12, 0, 10)}
    base, cand = _pair(tmp_path / "runs", cells)
    rc, report, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells))
    niah = next(c for c in report["decision"]["cells"] if c["task"] == "niah")
    assert niah["boundary"] == "cannot_gain" and niah["verdict"] == "loss" and not niah["excluded"]
    assert rc == 1 and report["decision"]["failing"] == ["niah @ 4096"]
    assert "loss: niah @ 4096" in report["decision"]["line"]


def test_passing_plan_records_its_name_and_hash_and_leads_the_markdown(tmp_path, capsys):
    cells = {("gsm8k", None): (700, 3, 3, 294), ("niah", 4096): (990, 0, 1, 9)}
    base, cand = _pair(tmp_path / "runs", cells)
    plan = _plan(tmp_path, cells, name="fp16.yaml")
    rc, report, _ = _compare(capsys, base, cand, "--plan", plan)
    digest = content_hash(yaml.safe_load(plan.read_text()))
    assert rc == 0 and report["decision"]["outcome"] == "pass"
    assert report["plan"]["content_hash"] == digest and report["plan"]["name"] == "p"
    niah = next(c for c in report["decision"]["cells"] if c["task"] == "niah")
    # baseline 99%: no room to gain, so agreement there is no evidence: left out, not passed
    assert niah["boundary"] == "cannot_gain" and niah["verdict"] == "ceiling_not_evidence"
    assert niah["excluded"] and not niah["passes"]
    assert "1 cell excluded (ceiling, not evidence: niah @ 4096)" in report["decision"]["line"]
    rc = main(["compare", str(base), str(cand), "--plan", str(plan)])
    md = capsys.readouterr().out
    first = md.splitlines()[2]
    assert first.startswith("**Decision (plan `p`, " + digest[:19]) and "PASS" in first


def test_without_a_plan_the_report_says_margins_were_not_preregistered(tmp_path, capsys):
    base, cand = _pair(tmp_path / "runs", {("gsm8k", None): (70, 3, 3, 24)})
    main(["compare", str(base), str(cand)])
    md = capsys.readouterr().out
    assert "Margins were not pre-registered" in md.splitlines()[2]


def test_holm_runs_over_the_declared_family_on_exact_p_values(tmp_path, capsys):
    # b = 1, c = 9: exact two-sided p 0.0215 (< 0.05 alone), mid-p 0.0117
    cells = {("gsm8k", None): (150, 9, 1, 40)}
    base, cand = _pair(tmp_path / "runs", cells)
    assert st.mcnemar_exact(1, 9).pvalue == pytest.approx(0.02148, abs=1e-5)
    _, alone, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells, name="a.yaml"))
    _, family, _ = _compare(
        capsys, base, cand, "--plan", _plan(tmp_path, cells, name="b.yaml", family_size=48)
    )
    assert alone["decision"]["cells"][0]["verdict"] == "loss"
    cell = family["decision"]["cells"][0]
    assert cell["loss_p_exact_adjusted"] == pytest.approx(min(1.0, 48 * 0.021484375))
    assert cell["verdict"] == "not_shown"  # no longer a significant loss, and NI is not shown either


@pytest.mark.parametrize(
    "plan_cells, why",
    [
        ({("gsm8k", None): 1}, "cells of the runs not in the plan: niah @ 4096"),
        ({("gsm8k", None): 1, ("niah", 4096): 1, ("niah", 8192): 1}, "not in the runs: niah @ 8192"),
        ({("gsm8k", None): 1, ("niah", 2048): 1}, "niah @ 2048"),
        ({("gsm8k", None): 1, ("passkey", 4096): 1}, "passkey @ 4096"),
    ],
)
def test_a_plan_that_does_not_match_the_runs_exits_2(tmp_path, capsys, plan_cells, why):
    base, cand = _pair(tmp_path / "runs", {("gsm8k", None): (70, 3, 3, 24), ("niah", 4096): (90, 1, 1, 8)})
    rc, report, err = _compare(capsys, base, cand, "--plan", _plan(tmp_path, plan_cells))
    assert rc == 2 and report is None
    assert why in err and len(err.strip().splitlines()) == 1


def _edited(tmp_path, mutate, rehash):
    body = _plan_body({("gsm8k", None): 1})
    text = dump_plan(body)
    data = yaml.safe_load(text)
    mutate(data)
    if rehash:
        data["content_hash"] = content_hash(data)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    "mutate, rehash, why",
    [
        (lambda d: d["cells"][0].update(exact_match_margin="5 pp"), False, "edited after it was written"),
        (lambda d: d["cells"][0].update(exact_match_margin="0.02"), True, "give a number with its unit"),
        (lambda d: d["cells"][0].update(exact_match_margin="0.01 nats/token"), True, "must be in pp"),
        (lambda d: d["cells"][0].update(logprob_margin="1 pp"), True, "must be in nats/token"),
        (lambda d: d.update(gate="vibes"), True, "gate must be one of"),
        (lambda d: d["family"].update(size=0), True, "family.size 0 is smaller"),
    ],
)
def test_bad_plans_exit_2_with_one_line(tmp_path, capsys, mutate, rehash, why):
    base, cand = _pair(tmp_path / "runs", {("gsm8k", None): (70, 3, 3, 24)})
    rc, report, err = _compare(capsys, base, cand, "--plan", _edited(tmp_path, mutate, rehash))
    assert rc == 2 and report is None
    assert why in err and len(err.strip().splitlines()) == 1


def test_runs_started_under_another_plan_are_refused(tmp_path, capsys):
    cells = {("gsm8k", None): (70, 3, 3, 24)}
    plan = _plan(tmp_path, cells)
    other = load_plan(_plan(tmp_path, cells, name="old.yaml", margin_pp=5))
    base, cand = _pair(tmp_path / "runs", cells, plan_identity=other.identity())
    rc, _, err = _compare(capsys, base, cand, "--plan", plan)
    assert rc == 2 and "the plan changed after the runs started" in err
    same = load_plan(plan)
    base, cand = _pair(tmp_path / "runs2", cells, plan_identity=same.identity())
    rc, report, _ = _compare(capsys, base, cand, "--plan", plan)
    assert rc in (0, 1) and report["plan"]["content_hash"] == same.content_hash


def test_plan_and_margin_flags_do_not_mix(tmp_path, capsys):
    cells = {("gsm8k", None): (70, 3, 3, 24)}
    base, cand = _pair(tmp_path / "runs", cells)
    rc, _, err = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells), "--margin", "0.05")
    assert rc == 2 and "the plan sets the margins" in err


def test_plan_cli_writes_an_exact_power_plan_from_an_assumed_discordance(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    args = ["plan", "--discordance", "0.1", "--cell", "gsm8k", "--cell", "niah@4096", "--margin", "0.05"]
    assert main([*args, "--out", str(out), "--family-size", "8"]) == 0
    plan = load_plan(out)
    body = yaml.safe_load(out.read_text())
    assert [c.name for c in plan.cells] == ["gsm8k", "niah @ 4096"]
    assert plan.family_size == 8 and plan.gate == "both"
    cell = body["cells"][0]
    assert cell["n"] == st.exact_noninferiority_n(0.1, 0.05).n
    assert cell["exact_power_at_n"] >= 0.8 and "approximation" in cell["approximation_method"]
    capsys.readouterr()
    assert main([*args, "--out", str(out)]) == 2  # a plan is never overwritten
    assert "exists" in capsys.readouterr().err
    assert main(["plan", "--discordance", "0.1", "--out", str(tmp_path / "q.yaml")]) == 2


def test_load_plan_refuses_non_plans(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: [1, 2\n")
    with pytest.raises(InputError, match="not YAML"):
        load_plan(path)
    path.write_text("rows: []\n")
    with pytest.raises(InputError, match="not an evalkit plan"):
        load_plan(path)


@pytest.mark.slow
def test_run_plan_records_the_hash_and_a_resume_under_an_edited_plan_is_refused(tmp_path, capsys):
    from helpers.faulty_server import FaultyServer

    from tests.test_run_config_file import TASKS_DIR

    plan = _plan(tmp_path, {("tiny_arith", None): 1})
    edited = _plan(tmp_path, {("tiny_arith", None): 1}, name="edited.yaml", margin_pp=5)
    out = tmp_path / "r"
    common = [
        "--arm",
        "a",
        "--tasks",
        "tiny_arith",
        "--include-path",
        str(TASKS_DIR),
        "--no-progress",
        "--out",
        str(out),
    ]
    with FaultyServer(lambda key, attempt: "ok") as server:
        assert main(["run", "--server", server.url, "--limit", "1", "--plan", str(plan), *common]) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["plan"] == load_plan(plan).identity()
        capsys.readouterr()
        rc = main(["run", "--server", server.url, "--limit", "2", "--plan", str(edited), *common])
    assert rc == 2 and "plan.content_hash" in capsys.readouterr().err


def test_the_decision_line_sets_the_candidate_against_the_floor_run(tmp_path, capsys):
    # the candidate changes 20 answers of 1000 on gsm8k; a floor run (another kernel) changes 4
    cells = {("gsm8k", None): (600, 10, 10, 380)}
    base, cand = _pair(tmp_path / "runs", cells)
    floor = _write(tmp_path / "floor", "cand", {("gsm8k", None): (608, 2, 2, 388)})
    rc, report, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, cells), "--floor", floor)
    line = report["decision"]["line"]
    assert "the candidate changes 20 of 1000 answers, the floor run 4" in line
    assert "exceeds the floor on gsm8k" in line
    (row,) = report["aa"]["rows"]
    assert row["exceeds"] and row["pvalue"] < 0.05


# exact two-sided p: a (b=3, c=12) 0.0352, b (0, 8) 0.0078, c (2, 6) 0.289, d (0, 10) 0.00195;
# baselines inside (2%, 98%)
SEQUENCE = {
    ("a", None): (300, 12, 3, 150),
    ("b", None): (300, 8, 0, 150),
    ("c", None): (300, 6, 2, 150),
    ("d", None): (300, 10, 0, 150),
}


def test_a_fixed_sequence_plan_tests_losses_in_order_and_stops_at_the_first_non_loss(tmp_path, capsys):
    base, cand = _pair(tmp_path / "runs", SEQUENCE)
    order = ["a", "b", "c", "d"]
    rc, report, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, SEQUENCE, order=order))
    cells = {c["task"]: c for c in report["decision"]["cells"]}
    # by hand at loss alpha 0.05: a .035 loss, b .0078 loss, c .289 stops; d is not tested
    assert [cells[k]["verdict"] == "loss" for k in order] == [True, True, False, False]
    assert [cells[k]["loss_test"] for k in order] == ["tested", "tested", "tested", "not tested"]
    assert report["decision"]["family"]["stopped_at"] == "c" and rc == 1
    # Holm over the same four finds d and b, not a (2 x .035 > .05)
    _, holm, _ = _compare(capsys, base, cand, "--plan", _plan(tmp_path, SEQUENCE, name="h.yaml"))
    assert {c["task"] for c in holm["decision"]["cells"] if c["verdict"] == "loss"} == {"b", "d"}
    main(
        [
            "compare",
            str(base),
            str(cand),
            "--plan",
            str(_plan(tmp_path, SEQUENCE, name="m.yaml", order=order)),
        ]
    )
    md = capsys.readouterr().out
    assert "| not tested |" not in md and "(not tested)" in md and "fixed sequence a → b → c → d" in md


@pytest.mark.parametrize(
    "order, why",
    [(None, "family.order must list the cells"), (["a", "b"], "must name every cell once")],
)
def test_a_fixed_sequence_without_a_full_order_is_refused(tmp_path, capsys, order, why):
    body = _plan_body(SEQUENCE, order=["a", "b", "c", "d"])
    if order is None:
        del body["family"]["order"]
    else:
        body["family"]["order"] = order
    path = tmp_path / "bad.yaml"
    path.write_text(dump_plan(body), encoding="utf-8")
    base, cand = _pair(tmp_path / "runs", SEQUENCE)
    rc, _, err = _compare(capsys, base, cand, "--plan", path)
    assert rc == 2 and why in err and len(err.strip().splitlines()) == 1


def test_plan_cli_writes_a_fixed_sequence_in_the_order_of_the_cells(tmp_path):
    out = tmp_path / "fs.yaml"
    args = ["plan", "--discordance", "0.1", "--cell", "niah@4096", "--cell", "gsm8k", "--margin", "0.05"]
    assert main([*args, "--multiplicity", "fixed-sequence", "--out", str(out)]) == 0
    plan = load_plan(out)
    assert plan.family_procedure == "fixed-sequence" and plan.family_order == ("niah @ 4096", "gsm8k")
