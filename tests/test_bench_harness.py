"""The benchmark scripts' shared harness (`evalkit.bench.harness`): clock, budget, log, sections
and the checkout bootstrap, on a fake clock (nothing here depends on the machine's speed)."""

from __future__ import annotations

import sys

import pytest

from evalkit.bench import harness


class FakeTimer:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_budget_counts_on_the_clock_from_its_start():
    timer = FakeTimer()
    clock = harness.Clock(t0=90.0, timer=timer)  # the script's first line was 10 s ago
    budget = harness.Budget(60, clock)
    assert clock.elapsed() == 10.0 and budget.left() == 50.0 and budget.end == 150.0
    timer.now = 175.0
    assert budget.left() == -25.0


def test_log_stamps_seconds_and_echoes_to_a_file(tmp_path, capsys):
    timer = FakeTimer()
    log = harness.Log(harness.Clock(t0=97.5, timer=timer), prefix="bench ")
    log("one", 2, {"k": 3})
    log.to_file(tmp_path / "run.log")
    log("two")
    assert capsys.readouterr().out.splitlines() == ["[bench     2.5s] one 2 {'k': 3}", "[bench     2.5s] two"]
    assert (tmp_path / "run.log").read_text() == "[bench     2.5s] two\n"


def _sections(timer: FakeTimer, **kw):
    report: dict = {}
    saves: list[dict] = []
    budget = harness.Budget(30, harness.Clock(timer=timer))
    log = harness.Log(harness.Clock(timer=timer))
    return report, saves, harness.Sections(report, lambda: saves.append(dict(report)), budget, log, **kw)


def test_a_failing_section_is_recorded_and_the_next_still_runs():
    timer = FakeTimer()
    errors: list[str] = []
    report, saves, sections = _sections(timer, on_error=lambda: errors.append("cleaned"))

    def boom():
        raise ValueError("bad shape")

    sections.run("first", boom)
    sections.run("second", lambda: {"ms": 1.5})
    sections.run("third", lambda: None)  # a section that writes the report itself
    assert report["errors"]["first"].startswith("ValueError: bad shape\n")
    assert "Traceback" in report["errors"]["first"]
    assert report["sections"] == {"second": {"ms": 1.5}}
    assert set(report["section_seconds"]) == {"first", "second", "third"}
    assert errors == ["cleaned"] and len(saves) == 3


def test_sections_are_skipped_when_the_budget_is_spent():
    timer = FakeTimer()
    report, saves, sections = _sections(timer, skip_below_s=10, timings_key=None)
    ran = []
    sections.run("early", lambda: ran.append("early"))
    timer.now += 25  # 5 s left, under the 10 s floor
    sections.run("late", lambda: ran.append("late"))
    assert ran == ["early"]
    assert report["errors"] == {"late": "skipped: time budget exhausted (30 s)"}
    assert "section_seconds" not in report and len(saves) == 2


def test_import_checkout_maps_a_folder_into_evalkit_only_when_it_does_not_import(tmp_path, monkeypatch):
    (tmp_path / "fakens").mkdir()
    (tmp_path / "fakens" / "__init__.py").write_text("ANSWER = 42\n")
    (tmp_path / "fakens" / "part.py").write_text("from evalkit.fakens import ANSWER\nDOUBLE = 2 * ANSWER\n")
    monkeypatch.delitem(sys.modules, "evalkit.fakens", raising=False)
    monkeypatch.delitem(sys.modules, "evalkit.fakens.part", raising=False)
    try:
        assert harness.import_checkout(tmp_path, ("fakens",)) is True
        from evalkit.fakens.part import DOUBLE

        assert DOUBLE == 84
        assert harness.import_checkout(tmp_path, ("fakens",)) is False  # already there
        assert harness.import_checkout() is False  # this checkout is installed: nothing to map
    finally:
        import evalkit

        sys.modules.pop("evalkit.fakens.part", None)
        sys.modules.pop("evalkit.fakens", None)
        if hasattr(evalkit, "fakens"):
            delattr(evalkit, "fakens")


@pytest.mark.parametrize(
    "script", ["bench_kernels", "bench_engine", "gpu_drift", "bench_gdn", "bench_prefill"]
)
def test_the_scripts_use_the_harness(script):
    """One harness: no script keeps its own bootstrap, log or section runner."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "scripts" / f"{script}.py").read_text()
    assert "harness" in text
    assert "spec_from_file_location" not in text and "def log(" not in text


def test_git_state_names_the_checkout_commit(tmp_path):
    """HEAD of the repository it is given, and whether its tree has uncommitted changes (git
    itself is the oracle, on a repository made here); outside a repository, None."""
    import subprocess

    assert harness.git_state(tmp_path) == {"commit": None, "dirty": False}

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    assert harness.git_state(tmp_path) == {"commit": first, "dirty": False}
    (tmp_path / "a.txt").write_text("two\n")
    assert harness.git_state(tmp_path) == {"commit": first, "dirty": True}
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "two")
    second = git("rev-parse", "HEAD")
    assert second != first and harness.git_state(tmp_path) == {"commit": second, "dirty": False}


def test_token_agreement_counts_identical_generations_and_matching_positions():
    ref = [[1, 2, 3, 4], [5, 6], [7]]
    arm = [[1, 2, 3, 4], [5, 0], [8]]
    assert harness.token_agreement(arm, ref) == {
        "identical_generations_vs_fp32": "1/3",
        "mean_token_agreement_vs_fp32": round((1 + 0.5 + 0) / 3, 4),
    }


def test_timed_engine_row_resets_the_counters_and_reports_the_timed_run():
    """A stand-in engine whose counters hold a compile run's numbers: the row is of the timed run."""
    from types import SimpleNamespace

    class Engine:
        stats = {"prefill_tokens": 99, "prefill_s": 9.0, "decode_tokens": 99, "decode_s": 9.0, "max_batch": 9}
        stats["decode_steps"] = 99
        state = SimpleNamespace(memory_bytes=lambda: 2**31)
        runner = SimpleNamespace(use_graphs=False, graph_error=None)

        def generate(self, prompts, sampling, use_tqdm):
            assert self.stats["prefill_tokens"] == 0 and not use_tqdm
            assert self.stats["decode_steps"] == 0
            self.stats.update(prefill_tokens=40, prefill_s=2.0, decode_tokens=30, decode_s=3.0, max_batch=2)
            self.stats["decode_steps"] = 15
            return [SimpleNamespace(flags={"nan"}), SimpleNamespace(flags=set())]

    outs, row = harness.timed_engine_row(Engine(), [[1], [2]], None, "cpu")
    assert len(outs) == 2
    assert {k: row[k] for k in ("prefill_tok_s", "decode_tok_s", "max_batch", "state_pool_gib", "flags")} == {
        "prefill_tok_s": 20, "decode_tok_s": 10, "max_batch": 2, "state_pool_gib": 2.0, "flags": ["nan"]
    }  # fmt: skip
    assert (row["prefill_tokens"], row["decode_tokens"]) == (40, 30)
    timing = ("prefill_s", "decode_s", "decode_steps", "decode_step_ms")
    assert [row[k] for k in timing] == [2.0, 3.0, 15, 200.0]
    assert "peak_mem_gib" not in row


def _write_samples(path, rows):
    import json

    path.mkdir(parents=True, exist_ok=True)
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")


def test_read_samples_keys_questions_and_differing_counts_changes_and_gaps(tmp_path):
    rows = [
        {"task": "gsm8k", "doc_id": 3, "length": None, "prompt_hash": "h1", "response": "42"},
        {"task": "passkey", "doc_id": "7", "length": 8192, "prompt_hash": "h2", "response": "x"}
        | {"error": "boom"},
    ]
    _write_samples(tmp_path / "a", rows)
    a = harness.read_samples(tmp_path / "a")
    assert a == {("gsm8k", "3", None): ("h1", "42"), ("passkey", "7", 8192): ("h2", "x")}
    assert harness.read_samples(tmp_path / "a", ("error",))[("passkey", "7", 8192)] == ("boom",)
    _write_samples(tmp_path / "b", [rows[0] | {"response": "41"}])
    b = harness.read_samples(tmp_path / "b")
    assert harness.differing(a, a) == 0
    assert harness.differing(a, b) == 2  # one changed answer, one question missing from b
    assert harness.differing(b, a) == 2


def test_prebuild_prompt_cache_builds_long_tasks_only_and_restores_the_variable(tmp_path, monkeypatch):
    from evalkit.tasks import registry

    calls, seen = [], []

    class FakeTask:
        def __init__(self, name, long):
            self.name, self.default_lengths = name, [8192] if long else []

        def requests(self, tokenizer, lengths, limit, seed):
            import os

            seen.append(os.environ.get("EVALKIT_PROMPT_CACHE"))
            calls.append((self.name, tokenizer, lengths, limit, seed))

    tasks = {"gsm8k": FakeTask("gsm8k", False), "passkey": FakeTask("passkey", True)}
    monkeypatch.setattr(registry, "get_task", tasks.__getitem__)
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", "/elsewhere")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "stale").write_text("old")
    loads = []
    seconds = harness.prebuild_prompt_cache(
        tmp_path / "cache", ["gsm8k", "passkey"], lambda: loads.append(1) or "TOK", "8k", 5, 1234
    )
    assert seconds >= 0 and loads == [1] and not (tmp_path / "cache" / "stale").exists()
    assert calls == [("passkey", "TOK", [8192], 5, 1234)] and seen == [str(tmp_path / "cache")]
    import os

    assert os.environ["EVALKIT_PROMPT_CACHE"] == "/elsewhere"
    calls.clear()
    harness.prebuild_prompt_cache(tmp_path / "cache", ["gsm8k"], lambda: loads.append(1), None, None, 0)
    assert calls == [] and loads == [1]  # no long task: the tokenizer is never loaded
