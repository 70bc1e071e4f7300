"""The worked CI recipe (scripts/ci/): the workflow's steps run locally against fake OpenAI
servers and a fake GitHub API, and the comment poster on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.fake_github import FakeGitHub
from helpers.faulty_server import FaultyServer

from evalkit.ci import github_comment
from evalkit.ci.github_comment import MARKER, comment_body

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ci" / "evalkit_pr.sh"
WORKFLOW = ROOT / "scripts" / "ci" / "evalkit-pr.yml"
TASKS_DIR = ROOT / "tests" / "data" / "lm_eval_tasks"
EVALKIT = Path(sys.executable).parent / "evalkit"


def _github_env(gh: FakeGitHub, tmp_path: Path, pr: int = 7) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": pr}}))
    return {
        "GITHUB_API_URL": gh.url,
        "GITHUB_REPOSITORY": "acme/model",
        "GITHUB_TOKEN": gh.token,
        "GITHUB_EVENT_PATH": str(event),
    }


def test_the_workflow_installs_light_and_runs_the_script_with_rights_to_comment():
    flow = yaml.safe_load(WORKFLOW.read_text())
    assert "pull_request" in flow[True]  # YAML 1.1 reads the key `on` as true
    assert flow["permissions"]["pull-requests"] == "write"
    (job,) = flow["jobs"].values()
    runs = [step.get("run", "") for step in job["steps"]]
    assert 'pip install ".[lmeval]"' in runs and not any("[engine]" in r or "torch" in r for r in runs)
    assert "bash scripts/ci/evalkit_pr.sh evalkit-pr" in runs
    assert job["env"]["EVALKIT_FAIL_ON"] == "not-noninferior" and "GITHUB_TOKEN" in job["env"]
    upload = next(s for s in job["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()"  # the runs are kept when the gate fails the job


def test_the_comment_is_created_then_edited_in_place(tmp_path, monkeypatch, capsys):
    report = tmp_path / "comment.md"
    with FakeGitHub() as gh:
        for key, value in _github_env(gh, tmp_path).items():
            monkeypatch.setenv(key, value)
        report.write_text("### first report\n")
        assert github_comment.main(["--file", str(report)]) == 0
        report.write_text("### second report\n")
        assert github_comment.main(["--file", str(report)]) == 0
        assert github_comment.main(["--file", str(report), "--pr", "8"]) == 0
        by_pr = {c["pr"]: c["body"] for c in gh.comments.values()}
    assert len(gh.comments) == 2 and by_pr[7] == f"{MARKER}\n### second report\n"
    assert [m for m, _ in gh.calls].count("PATCH") == 1
    assert "updated comment" in capsys.readouterr().out


def test_the_poster_without_a_pr_without_a_token_and_with_a_bad_token(tmp_path, monkeypatch, capsys):
    report = tmp_path / "comment.md"
    report.write_text("x")
    monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
    assert github_comment.main(["--file", str(report)]) == 0  # a push event: nothing to post
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert github_comment.main(["--file", str(report), "--pr", "3", "--repo", "a/b"]) == 2
    assert "$GITHUB_TOKEN" in capsys.readouterr().err
    with FakeGitHub() as gh:
        monkeypatch.setenv("GITHUB_TOKEN", "wrong")
        assert (
            github_comment.main(["--file", str(report), "--pr", "3", "--repo", "a/b", "--api-url", gh.url])
            == 2
        )
    assert "HTTP 401" in capsys.readouterr().err.splitlines()[-1]


def test_a_long_report_is_cut_to_githubs_limit():
    body = comment_body("x" * 100_000)
    assert len(body) == github_comment.GITHUB_LIMIT and body.startswith(MARKER)
    assert body.endswith("the full report is in the job's artifacts)")
    assert comment_body("short") == f"{MARKER}\nshort\n"


def _compare_has_the_gate() -> bool:
    out = subprocess.run([str(EVALKIT), "compare", "--help"], capture_output=True, text=True)
    return all(flag in out.stdout for flag in ("--fail-on", "--brief", "--md", "--json"))


def _script(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {
        **os.environ,
        "EVALKIT": str(EVALKIT),
        "PYTHON": sys.executable,
        "EVALKIT_TASKS": "tiny_arith",
        "EVALKIT_RUN_ARGS": f"--include-path {TASKS_DIR} --no-progress",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")], env=full, capture_output=True, text=True, timeout=300
    )


def test_the_script_needs_two_arms(tmp_path):
    out = _script(tmp_path, {"EVALKIT_BASELINE_URL": "http://127.0.0.1:9"})
    assert out.returncode == 2 and "set EVALKIT_BASELINE_URL and EVALKIT_CANDIDATE_URL" in out.stderr


def test_the_script_evaluates_two_servers_gates_and_comments(tmp_path):
    ok = lambda key, attempt: "ok"  # noqa: E731
    with FaultyServer(ok) as base, FaultyServer(ok) as cand, FakeGitHub() as gh:
        env = {
            "EVALKIT_BASELINE_URL": base.url,
            "EVALKIT_CANDIDATE_URL": cand.url,
            **_github_env(gh, tmp_path),
        }
        out = _script(tmp_path, env)
        runs = {arm: tmp_path / "out" / arm / "samples.jsonl" for arm in ("baseline", "candidate")}
        assert all(len(p.read_text().splitlines()) == 6 for p in runs.values()), out.stderr
        if not _compare_has_the_gate():
            assert out.returncode == 2  # the script stops at compare, posting nothing
            pytest.skip("this evalkit compare has no --fail-on/--brief/--md/--json yet (the compare branch)")
        # 6 questions and identical answers: no loss, but non-inferiority cannot be shown
        assert out.returncode == 1, out.stderr
        assert "gate failed: --fail-on not-noninferior" in out.stderr
        report = (tmp_path / "out" / "comment.md").read_text()
        (comment,) = gh.comments.values()
        assert comment["pr"] == 7 and comment["body"] == comment_body(report)
        assert (tmp_path / "summary.md").read_text() == report  # written once (by compare), not twice
        assert json.loads((tmp_path / "out" / "compare.json").read_text())

        # the same runs as downloaded run directories, gated on a significant loss only: passes
        rerun = {
            "EVALKIT_BASELINE_RUN": str(tmp_path / "out" / "baseline"),
            "EVALKIT_CANDIDATE_RUN": str(tmp_path / "out" / "candidate"),
            "EVALKIT_FAIL_ON": "loss",
            **_github_env(gh, tmp_path),
        }
        out = _script(tmp_path, rerun)
        assert out.returncode == 0, out.stderr
        assert len(gh.comments) == 1  # edited in place


STUB = '''#!{python}
"""`evalkit` with `compare` replaced: records its arguments, writes --md/--json and the job
summary, exits $STUB_RC."""
import json, os, subprocess, sys
args = sys.argv[1:]
if args[:1] != ["compare"]:
    sys.exit(subprocess.call([{evalkit!r}, *args]))
open(os.environ["STUB_ARGS"], "w").write(json.dumps(args))
value = lambda flag: args[args.index(flag) + 1]
open(value("--md"), "w").write("### stub verdict\\n")
open(value("--json"), "w").write(json.dumps({{"status": "stub"}}))
if os.environ.get("GITHUB_STEP_SUMMARY") and int(os.environ["STUB_RC"]) < 2:  # as compare appends it
    open(os.environ["GITHUB_STEP_SUMMARY"], "a").write("### stub verdict\\n")
sys.exit(int(os.environ["STUB_RC"]))
'''


@pytest.mark.parametrize("gate_rc", [0, 1, 2])
def test_the_script_passes_the_gate_through_and_comments_unless_compare_failed(tmp_path, gate_rc):
    """The script's own logic, whatever compare decides (a stand-in compare with the documented
    exit codes: 0 pass, 1 gate failed, 2 input error)."""
    stub = tmp_path / "evalkit-stub"
    stub.write_text(STUB.format(python=sys.executable, evalkit=str(EVALKIT)))
    stub.chmod(0o755)
    runs = tmp_path / "runs"
    runs.mkdir()
    with FakeGitHub() as gh:
        env = {
            "EVALKIT": str(stub),
            "STUB_ARGS": str(tmp_path / "args.json"),
            "STUB_RC": str(gate_rc),
            "EVALKIT_BASELINE_RUN": str(runs / "a"),
            "EVALKIT_CANDIDATE_RUN": str(runs / "b"),
            "EVALKIT_COMPARE_ARGS": "--margin 0.02",
            **_github_env(gh, tmp_path),
        }
        out = _script(tmp_path, env)
    args = json.loads((tmp_path / "args.json").read_text())
    out_dir = tmp_path / "out"
    assert args == [
        "compare", str(runs / "a"), str(runs / "b"), "--fail-on", "not-noninferior", "--brief",
        "--md", str(out_dir / "comment.md"), "--json", str(out_dir / "compare.json"), "--margin", "0.02",
    ]  # fmt: skip
    assert out.returncode == gate_rc
    posted = [c["body"] for c in gh.comments.values()]
    if gate_rc == 2:
        assert posted == [] and not (tmp_path / "summary.md").exists()
    else:
        assert posted == [comment_body("### stub verdict\n")]
        assert (tmp_path / "summary.md").read_text() == "### stub verdict\n"  # once: compare's
        assert ("gate failed" if gate_rc else "gate passed") in out.stderr
