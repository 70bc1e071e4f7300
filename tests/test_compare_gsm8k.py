"""Done-when (a): two GSM8K runs (1319 ids; 1273 vs 1276 right; 18 / 21 discordant) reproduce the
reference statistics, as evalkit run directories AND as lm-eval 0.4.13 --log_samples files."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.compare import JSON_KEYS, build_report, render_json, render_markdown
from evalkit.store import load_run
from evalkit.tasks.data import BUNDLED_DIR

REPO = Path(__file__).resolve().parent.parent
DATA = BUNDLED_DIR


def _example_module():
    path = REPO / "scripts" / "make_compare_example.py"
    spec = importlib.util.spec_from_file_location("make_compare_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def dirs_json(runs):
    res = _cli(runs["dirs"]["fp32"], runs["dirs"]["fp16"], "--format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not (DATA / "test.jsonl").exists():
        pytest.skip(f"GSM8K data not found at {DATA}")
    mod = _example_module()
    out = tmp_path_factory.mktemp("gsm8k")
    docs = mod.build_docs(DATA)
    dirs = mod.build_runs(out, DATA, docs, durable=False)  # fsync per line is tested in test_store*
    files = mod.write_lmeval_samples(out, DATA, docs)
    return {"dirs": dirs, "files": files, "docs": docs, "out": out}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def _row(report, metric="flexible-extract"):
    (row,) = [r for r in report["rows"] if r["metric"] == metric]
    return row


def test_run_dirs_hold_the_planted_table(runs):
    fp32, fp16 = load_run(runs["dirs"]["fp32"]), load_run(runs["dirs"]["fp16"])
    ids = [json.loads(line) for line in (DATA / "test.jsonl").read_text().splitlines()]
    assert len(fp32.samples) == len(fp16.samples) == len(ids) == 1319
    assert sum(s["correct"]["flexible-extract"] for s in fp32.samples) == 1276
    assert sum(s["correct"]["flexible-extract"] for s in fp16.samples) == 1273
    assert [s["target"] for s in fp16.samples] == [d["answer"] for d in ids]


def test_cli_json_reproduces_reference_values_candidate_fp16(dirs_json):
    row = _row(dirs_json)
    assert set(JSON_KEYS) <= set(row)
    assert (row["n"], row["baseline_only"], row["candidate_only"]) == (1319, 21, 18)
    assert round(row["acc_baseline"], 6) == round(1276 / 1319, 6) and round(row["acc_candidate"], 6) == round(
        1273 / 1319, 6
    )
    assert round(row["mcnemar_exact_p"], 6) == 0.749259
    assert round(row["mcnemar_midp"], 6) == 0.635828
    # candidate (fp16, the 1273 side) - baseline: the reference interval as statistics.md states it
    assert (round(row["diff_ci_low"], 6), round(row["diff_ci_high"], 6)) == (-0.012062, 0.007329)
    assert round(row["diff"], 6) == round(-3 / 1319, 6)
    assert round(row["noninferiority_p"], 6) == 0.057866
    assert round(row["mde"], 6) == 0.013253
    assert round(row["stderr_candidate"], 6) == round(((1273 / 1319) * (46 / 1319) / 1318) ** 0.5, 6)
    assert row["verdict"] == "inconclusive"


def test_swapping_the_arms_flips_the_signs(runs):
    report = build_report(load_run(runs["dirs"]["fp16"]), load_run(runs["dirs"]["fp32"]))
    row = _row(report)
    assert (round(row["diff_ci_low"], 6), round(row["diff_ci_high"], 6)) == (-0.007329, 0.012062)
    assert (row["baseline_only"], row["candidate_only"]) == (18, 21)
    assert round(row["mcnemar_midp"], 6) == 0.635828


def test_lm_eval_files_follow_lm_eval_scoring(runs):
    """The fixture's lm-eval lines are scored exactly as lm-eval's own gsm8k filters and metric score them."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    filters = {
        "strict-match": RegexFilter(r"#### (\-?[0-9\.\,]+)"),
        "flexible-extract": RegexFilter(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1),
    }
    lines = [json.loads(x) for x in runs["files"]["fp16"].read_text().split("\n") if x]
    assert len(lines) == 2 * 1319 and [x["filter"] for x in lines[:1319]] == ["strict-match"] * 1319
    assert list(lines[0]) == [
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
        "exact_match",
    ]
    for x in lines[::37]:
        picked = filters[x["filter"]].apply([x["resps"][0]], [x["doc"]])[0][0]
        assert x["filtered_resps"] == [picked]
        em = exact_match_hf_evaluate(
            [picked],
            [x["target"]],
            ignore_case=True,
            ignore_punctuation=False,
            regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"],
        )["exact_match"]
        assert x["exact_match"] == em
    assert lines[0]["prompt_hash"].startswith("32680f26")  # lm-eval's hash of doc 0's 5-shot prompt


def test_lm_eval_files_give_the_same_report(runs, dirs_json):
    from_files = _cli(runs["files"]["fp32"], runs["files"]["fp16"], "--format", "json")
    assert from_files.returncode == 0, from_files.stderr
    from_folders = render_json(
        build_report(
            load_run(runs["files"]["fp32"].parent.parent), load_run(runs["files"]["fp16"].parent.parent)
        )
    )
    a, b, c = dirs_json, json.loads(from_files.stdout), json.loads(from_folders)
    for key in ("rows", "trends", "excluded", "notes", "verdict"):
        assert a[key] == b[key] == c[key], key
    assert b["baseline"]["kind"] == "lm-eval"


def test_mixed_sources_pair_on_prompt_hash(runs):
    """An evalkit run directory against an lm-eval file: prompt hashes agree, so they pair."""
    report = build_report(load_run(runs["dirs"]["fp32"]), load_run(runs["files"]["fp16"]))
    assert round(_row(report)["mcnemar_midp"], 6) == 0.635828


def test_markdown_is_a_pasteable_table_with_collapsible_ids(runs):
    res = _cli(runs["dirs"]["fp32"], runs["dirs"]["fp16"])
    assert res.returncode == 0, res.stderr
    md = res.stdout
    assert md == render_markdown(build_report(load_run(runs["dirs"]["fp32"]), load_run(runs["dirs"]["fp16"])))
    assert (
        "| gsm8k | flexible-extract | 1319 | 96.74 ± 0.49 | 96.51 ± 0.51 | -0.23 [-1.21, +0.73] | 21 / 18 |"
    ) in md
    assert "0.636" in md and "0.749" in md and "0.058" in md and "| 1.33 |" in md
    assert "**Verdict:** Inconclusive" in md
    assert (
        "<details><summary>Discordant questions, gsm8k flexible-extract: 21 baseline-only, 18 candidate-only"
    ) in md
    assert "not worse by more than 1.21 pp" in md


def test_plot_and_out_file(runs, tmp_path):
    png, out = tmp_path / "acc.png", tmp_path / "report.md"
    res = _cli(runs["dirs"]["fp32"], runs["dirs"]["fp16"], "--plot", png, "--out", out)
    assert res.returncode == 0, res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert out.read_text().startswith("### evalkit compare") and res.stdout == ""


def test_committed_example_report_is_current(monkeypatch):
    """results/compare-example/report.md is what `evalkit compare` prints for the committed run dirs."""
    example = REPO / "results" / "compare-example"
    if not (example / "report.md").exists():
        pytest.skip("example not generated")
    monkeypatch.chdir(REPO)
    base, cand = "results/compare-example/fp32", "results/compare-example/fp16"
    report = build_report(load_run(base), load_run(cand))
    assert render_markdown(report) == (example / "report.md").read_text()
    assert json.loads(render_json(report)) == json.loads((example / "report.json").read_text())


def _as_evalkit_gsm8k_names(src: Path, dst: Path) -> Path:
    """The run directory with the metric names evalkit's gsm8k task writes (`exact_match,<filter>`)."""
    dst.mkdir()
    (dst / "manifest.json").write_text((src / "manifest.json").read_text())
    lines = []
    for line in (src / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        s["correct"] = {f"exact_match,{k}": v for k, v in s["correct"].items()}
        lines.append(json.dumps(s))
    (dst / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def test_evalkit_names_pair_with_lm_eval_filter_names(runs, tmp_path):
    """issue 19: an evalkit run (exact_match,flexible-extract) pairs with an lm-eval log of the same
    task (flexible-extract): same responses -> 0 discordant; the two arms -> the reference table."""
    fp32 = load_run(_as_evalkit_gsm8k_names(runs["dirs"]["fp32"], tmp_path / "fp32"))
    assert {m for s in fp32.samples for m in s["correct"]} == {
        "exact_match,strict-match",
        "exact_match,flexible-extract",
    }
    same = build_report(fp32, load_run(runs["files"]["fp32"]))
    assert [r["metric"] for r in same["rows"]] == ["exact_match,flexible-extract", "exact_match,strict-match"]
    assert all(r["verdict"] == "identical" and r["n"] == 1319 for r in same["rows"])
    assert not any("scored only" in n for n in same["notes"])
    arms = build_report(fp32, load_run(runs["files"]["fp16"]))
    row = _row(arms, "exact_match,flexible-extract")
    assert (row["baseline_only"], row["candidate_only"]) == (21, 18)
    assert round(row["mcnemar_midp"], 6) == 0.635828
