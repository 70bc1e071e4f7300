"""compare streams the samples files (issue 43, item 8: it held ~7x its input): a run is read one
line at a time and, for compare, without the prompt texts it pairs by prompt_hash instead. Measured
with tracemalloc (allocations, not time): reading a 24 MB run allocates a small fraction of it.
`scripts/measure_compare_memory.py` measures the whole command's peak RSS (results/compare-memory/)."""

from __future__ import annotations

import tracemalloc

from helpers.runs import manifest

from evalkit.store import RunWriter, load_finished_run, prompt_hash

N, PROMPT_BYTES = 48, 512 * 1024


def _big_run(path):
    with RunWriter.open(path, manifest("fp16", ["passkey"]), durable=False) as w:
        for doc in range(N):
            prompt = f"{doc} " + "x" * PROMPT_BYTES
            w.append(
                {
                    "task": "passkey",
                    "doc_id": doc,
                    "length": 131072,
                    "prompt_hash": prompt_hash(prompt),
                    "prompt": prompt,
                    "target": "1",
                    "response": "1",
                    "correct": {"m": True},
                    "error": None,
                }
            )
        w.finish()
    return path


def test_reading_a_run_for_compare_holds_a_fraction_of_it(tmp_path):
    run = _big_run(tmp_path / "run")
    size = (run / "samples.jsonl").stat().st_size
    assert size > N * PROMPT_BYTES
    tracemalloc.start()
    try:
        data = load_finished_run(run, "candidate", keep_prompts=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data.samples) == N and all("prompt" not in s for s in data.samples)
    assert peak < size / 8, f"peak {peak / 2**20:.1f} MiB reading a {size / 2**20:.1f} MiB run"


def test_a_reader_that_keeps_prompts_gets_them(tmp_path):
    run = _big_run(tmp_path / "run")
    data = load_finished_run(run)
    assert all(len(s["prompt"]) > PROMPT_BYTES for s in data.samples)
