"""Done-when (c): every malformed input makes `evalkit compare` exit 2 with one clear line on stderr,
never a traceback (the CLI runs in a subprocess, all cases in parallel)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.store import RunWriter, config_hash, prompt_hash

REPO = Path(__file__).resolve().parent.parent
N = 20


def _manifest(arm, task_config=None, tasks=("gsm8k",)):
    cfg = task_config or {"shots": 5}
    return {
        "model": {"path": "m"},
        "backend": {"name": "local"},
        "arm": {"label": arm},
        "tasks": {t: {"config": cfg, "hash": config_hash(cfg)} for t in tasks},
    }


def _write(path, arm, *, n=N, task="gsm8k", prompt_salt="", error_all=False, task_config=None):
    w = RunWriter.open(path, _manifest(arm, task_config, (task,)), durable=False)
    for i in range(n):
        right = (i * 7 + (arm == "b")) % 5 != 0
        prompt = f"Q{i}{prompt_salt if i % 3 else ''}"
        w.append(
            {
                "task": task,
                "doc_id": i,
                "prompt_hash": prompt_hash(prompt),
                "target": "1",
                "response": "1",
                "correct": {} if error_all else {"em": right},
                "error": "HTTP 500" if error_all else None,
            }
        )
    w.finish()
    return path


def _lmeval_file(folder, n=N):
    folder.mkdir(parents=True)
    path = folder / "samples_gsm8k_2026-01-01T00-00-00.000001.jsonl"
    lines = []
    for filt in ("strict-match", "flexible-extract"):
        for i in range(n):
            lines.append(
                json.dumps(
                    {
                        "doc_id": i,
                        "doc": {"q": i},
                        "target": "1",
                        "arguments": {"gen_args_0": {"arg_0": f"Q{i}", "arg_1": {}}},
                        "resps": [["1"]],
                        "filtered_resps": ["1"],
                        "filter": filt,
                        "metrics": ["exact_match"],
                        "doc_hash": "x",
                        "prompt_hash": prompt_hash(f"Q{i}"),
                        "target_hash": "y",
                        "exact_match": float(i % 4 != 0),
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def _build(root: Path) -> dict[str, tuple[list[str], str]]:
    """case name -> (compare arguments, a fragment the one-line message must contain)."""
    good_a, good_b = _write(root / "a", "a"), _write(root / "b", "b")
    cases: dict[str, tuple[list[str], str]] = {}

    def variant(name, mutate):
        path = _write(root / name, "b")
        samples = path / "samples.jsonl"
        samples.write_bytes(mutate(samples.read_bytes()))
        return path

    lines = lambda data: data.split(b"\n")
    trunc = variant("trunc", lambda d: d[: len(d) - 25])
    cases["truncated_line"] = ([good_a, trunc], f"{trunc / 'samples.jsonl'}:{N}: truncated last line")
    bad = variant("bad", lambda d: b"\n".join(lines(d)[:3] + [b"{oops"] + lines(d)[3:]))
    cases["malformed_line"] = ([good_a, bad], f"{bad / 'samples.jsonl'}:4: malformed JSON line")

    def drop_field(data):
        rows = lines(data)
        obj = json.loads(rows[5])
        del obj["correct"]
        rows[5] = json.dumps(obj).encode()
        return b"\n".join(rows)

    missing = variant("missing", drop_field)
    cases["missing_field"] = ([good_a, missing], f"{missing / 'samples.jsonl'}:6: missing field 'correct'")
    dup = variant("dup", lambda d: d + lines(d)[0] + b"\n")
    cases["duplicate_sample"] = ([good_a, dup], "duplicate sample gsm8k/0")
    empty = variant("empty", lambda d: b"")
    cases["empty_run"] = ([good_a, empty], "empty run")
    (root / "nothing").mkdir()
    cases["empty_dir"] = ([good_a, root / "nothing"], "empty run")
    cases["no_such_path"] = ([good_a, root / "nope"], "no such file or directory")
    stray = root / "notes.txt"
    stray.write_text("hello")
    cases["not_a_run"] = ([good_a, stray], "neither an evalkit run directory nor an lm-eval")
    salted = _write(root / "salted", "b", prompt_salt="!")
    cases["prompt_mismatch"] = ([good_a, salted], "paired questions were asked with different prompts")
    other = _write(root / "other", "b", task="passkey")
    cases["different_tasks"] = (
        [good_a, other],
        "runs of different tasks: baseline has gsm8k; candidate has passkey",
    )
    short = _write(root / "short", "b", n=N - 2)
    cases["missing_questions"] = ([good_a, short], f"baseline {N}, candidate {N - 2}, shared {N - 2}")
    cfg = _write(root / "cfg", "b", task_config={"shots": 8})
    cases["config_hash_mismatch"] = ([good_a, cfg], "task 'gsm8k' has a different config")
    errs = _write(root / "errs", "b", error_all=True)
    cases["all_errored"] = ([good_a, errs], "no pair left to compare")
    cases["bad_margin"] = ([good_a, good_b, "--margin", "5"], "--margin must be a fraction")
    cases["unwritable_plot"] = (
        [good_a, good_b, "--plot", root / "no" / "dir" / "x.png"],
        "cannot write the plot",
    )
    lm_a = _lmeval_file(root / "lm_a")
    lm_trunc = _lmeval_file(root / "lm_trunc")
    lm_trunc.write_bytes(lm_trunc.read_bytes()[:-30])
    cases["lmeval_truncated"] = ([lm_a, lm_trunc], f"{lm_trunc}:{2 * N}: truncated last line")
    lm_missing = _lmeval_file(root / "lm_missing")
    rows = lm_missing.read_text().split("\n")
    obj = json.loads(rows[2])
    del obj["prompt_hash"]
    rows[2] = json.dumps(obj)
    lm_missing.write_text("\n".join(rows))
    cases["lmeval_missing_field"] = ([lm_a, lm_missing], f"{lm_missing}:3: missing field 'prompt_hash'")
    return {k: ([str(a) for a in args], frag) for k, (args, frag) in cases.items()}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    cases = _build(root)
    cases["ok_intersection"] = ([str(root / "a"), str(root / "short"), "--intersection"], "")
    cases["ok_allow_prompt_mismatch"] = (
        [str(root / "a"), str(root / "salted"), "--allow-prompt-mismatch"],
        "",
    )
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "evalkit", "compare", *args],
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, (args, _) in cases.items()
    }
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        results[name] = (proc.returncode, out, err, cases[name][1])
    return results


BAD = [
    "truncated_line",
    "malformed_line",
    "missing_field",
    "duplicate_sample",
    "empty_run",
    "empty_dir",
    "no_such_path",
    "not_a_run",
    "prompt_mismatch",
    "different_tasks",
    "missing_questions",
    "config_hash_mismatch",
    "all_errored",
    "bad_margin",
    "unwritable_plot",
    "lmeval_truncated",
    "lmeval_missing_field",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_clear_line_and_exit_2(outcomes, case):
    rc, out, err, fragment = outcomes[case]
    assert rc == 2, (out, err)
    assert "Traceback" not in err and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("evalkit compare: error: ")
    assert fragment in err, err


def test_mismatch_messages_list_ids_and_the_override(outcomes):
    err = outcomes["prompt_mismatch"][2]
    assert "gsm8k/1, gsm8k/2, gsm8k/4, gsm8k/5, gsm8k/7, ..." in err and "--allow-prompt-mismatch" in err
    err = outcomes["missing_questions"][2]
    assert "2 only in baseline, e.g. gsm8k/18, gsm8k/19" in err and "--intersection" in err


def test_overrides_compare_and_say_so(outcomes):
    rc, out, err, _ = outcomes["ok_intersection"]
    assert rc == 0, err
    assert f"| {N - 2} |" in out and "--intersection: compared 18 shared questions" in out
    rc, out, err, _ = outcomes["ok_allow_prompt_mismatch"]
    assert rc == 0, err
    assert "--allow-prompt-mismatch: 13 paired questions had different prompts" in out
