"""RULER habits in compare (issue 43): the per-length average over multi-length cells and each
arm's effective length under the stated rule (baseline at the shortest length minus 5 pp)."""

import json

from evalkit.compare import build_report, render_json, render_markdown
from evalkit.compare.effective_length import EFFECTIVE_DROP
from evalkit.store import RunWriter, config_hash, load_run, prompt_hash

LENGTHS = [4096, 8192, 16384, 32768]
# right answers of 20 per length: (task, arm) -> per length
PLANTED = {
    ("passkey", "fp32"): [20, 20, 19, 18],  # 100, 100, 95, 90 %: threshold 95 % -> 16384
    ("passkey", "fp16"): [20, 19, 16, 19],  # 95 ok, 80 breaks at 16384 -> 8192 (no later recovery)
    ("niah", "fp32"): [18, 18, 17, 17],  # 90 %: threshold 85 % -> 32768
    ("niah", "fp16"): [16, 18, 18, 18],  # 80 % < 85 % at the shortest length -> none
}


def _run(path, arm):
    cfg = {"lengths": LENGTHS}
    manifest = {
        "model": {"path": "m"},
        "backend": {"name": "local"},
        "arm": {"label": arm, "state_dtype": arm},
        "tasks": {t: {"config": cfg, "hash": config_hash(cfg)} for t in ("passkey", "niah")},
    }
    w = RunWriter.open(path, manifest, durable=False)
    for task in ("passkey", "niah"):
        for length, right in zip(LENGTHS, PLANTED[(task, arm)]):
            for doc in range(20):
                w.append(
                    {
                        "task": task,
                        "doc_id": doc,
                        "length": length,
                        "prompt_hash": prompt_hash(f"{task}{doc}@{length}"),
                        "target": "x",
                        "response": "x" if doc < right else "y",
                        "correct": {"string_match_all": doc < right},
                        "error": None,
                    }
                )
    w.finish()
    return load_run(path)


def _report(tmp_path):
    return build_report(_run(tmp_path / "a", "fp32"), _run(tmp_path / "b", "fp16"))


def test_effective_length_follows_the_stated_rule(tmp_path):
    summary = _report(tmp_path)["length_summary"]
    got = {e["task"]: (e["threshold"], e["baseline"], e["candidate"]) for e in summary["effective"]}
    assert EFFECTIVE_DROP == 0.05
    assert got["passkey"][1:] == (16384, 8192) and abs(got["passkey"][0] - 0.95) < 1e-12
    assert got["niah"][1:] == (32768, None) and abs(got["niah"][0] - 0.85) < 1e-12
    assert "5 pp" in summary["rule"]


def test_per_length_average_over_the_tasks(tmp_path):
    per = _report(tmp_path)["length_summary"]["per_length"]
    assert [p["length"] for p in per] == LENGTHS and all(p["cells"] == 2 for p in per)
    for i, p in enumerate(per):
        base = (PLANTED[("passkey", "fp32")][i] + PLANTED[("niah", "fp32")][i]) / 40
        cand = (PLANTED[("passkey", "fp16")][i] + PLANTED[("niah", "fp16")][i]) / 40
        assert abs(p["baseline_mean"] - base) < 1e-12 and abs(p["candidate_mean"] - cand) < 1e-12


def test_markdown_and_json_carry_it(tmp_path):
    report = _report(tmp_path)
    md = render_markdown(report)
    assert "**By length**" in md and "**Effective length**" in md
    assert "| passkey | string_match_all | 95.00 | 16384 | 8192 |" in md
    assert "| niah | string_match_all | 85.00 | 32768 | < 4096 |" in md
    assert json.loads(render_json(report))["length_summary"]["effective"]
