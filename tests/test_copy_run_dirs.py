"""scripts/copy_run_dirs.py: run directories copied into results/ without their prompt text and,
with --drop-token-arrays, without the per-token log-probability arrays (their sums stay)."""

from __future__ import annotations

import json

from helpers.scripts import load_script


def _run(path, rows):
    (path / "arm").mkdir(parents=True)
    (path / "arm" / "manifest.json").write_text("{}")
    (path / "arm" / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "arm" / ".lock").write_text("pid 1")
    return path


def test_prompts_always_and_token_arrays_on_request_are_dropped(tmp_path):
    script = load_script("copy_run_dirs")
    row = {
        "task": "kv_recite_long", "prompt": "long text", "prompt_hash": "ab", "gold_logprob": -3.0,
        "gold_tokens": [5, 6], "gold_token_logprobs": [-1.0, -2.0], "gold_margins": [0.5, 0.1],
        "gold_min_margin": 0.1, "generated_ids": [5, 7], "item_correct": [True, False],
    }  # fmt: skip
    src = _run(tmp_path / "src", [row])
    assert script.main([str(src), str(tmp_path / "plain")]) == 0
    plain = json.loads((tmp_path / "plain" / "src" / "arm" / "samples.jsonl").read_text())
    assert plain == {k: v for k, v in row.items() if k != "prompt"}
    assert not (tmp_path / "plain" / "src" / "arm" / ".lock").exists()
    assert script.main(["--drop-token-arrays", str(src), str(tmp_path / "slim")]) == 0
    slim = json.loads((tmp_path / "slim" / "src" / "arm" / "samples.jsonl").read_text())
    dropped = ("prompt", *script.TOKEN_ARRAYS)
    assert script.TOKEN_ARRAYS == ("gold_token_logprobs", "gold_margins")
    assert slim == {k: v for k, v in row.items() if k not in dropped}
    assert (tmp_path / "slim" / "src" / "arm" / "manifest.json").read_text() == "{}"
