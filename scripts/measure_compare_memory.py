"""Peak memory of `evalkit compare` on a generated pair of run directories (issue 43, item 8).

Writes two runs of N samples, each carrying a long prompt text (as a 128k-token question does,
about 0.5 MB), then runs `evalkit compare A B --format json` in a fresh process and reads its
peak resident set size (ru_maxrss of the child). Prints one JSON line: the samples files' size,
the peak RSS, their ratio, and the baseline RSS of a process that only imports evalkit's compare.

    python scripts/measure_compare_memory.py [--samples 400] [--prompt-kb 256] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def write_run(path: Path, arm: str, n: int, prompt_kb: int, seed: int) -> int:
    from evalkit.store import RunWriter, config_hash, prompt_hash

    rng = random.Random(seed)
    cfg = {"shots": 0}
    manifest = {
        "model": {"path": "m"},
        "backend": {"name": "openai"},
        "arm": {"label": arm},
        "tasks": {"passkey": {"config": cfg, "hash": config_hash(cfg)}},
    }
    filler = "The grass is green. The sky is blue. " * (prompt_kb * 1024 // 37)
    with RunWriter.open(path, manifest, durable=False) as w:
        for doc in range(n):
            prompt = f"{doc}: {filler}"
            right = rng.random() < 0.8
            w.append(
                {
                    "task": "passkey",
                    "doc_id": doc,
                    "length": 131072,
                    "prompt_hash": prompt_hash(prompt),
                    "prompt": prompt,
                    "target": "1",
                    "response": "1" if right else "0",
                    "correct": {"passkey_match": right},
                    "error": None,
                    "generated_ids": [rng.randrange(1000) for _ in range(32)],
                }
            )
        w.finish()
    return (path / "samples.jsonl").stat().st_size


def peak_rss_mb(argv: list[str]) -> float:
    """The peak RSS of a child process running `argv` (Linux reports ru_maxrss in KiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if after <= before:
        sys.exit("cannot read the child's peak RSS (an earlier child used more); one measurement per process")
    return after / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--prompt-kb", type=int, default=256)
    ap.add_argument("--keep", help="write the runs here (and keep them) instead of a temporary folder")
    ap.add_argument("--what", choices=("compare", "import"), default="compare")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
    a, b = root / "base", root / "cand"
    size = 0
    for path, arm, seed in ((a, "fp32", 1), (b, "fp16", 2)):
        if not (path / "summary.json").exists():
            write_run(path, arm, args.samples, args.prompt_kb, seed)
        size += (path / "samples.jsonl").stat().st_size
    if args.what == "import":
        argv = [sys.executable, "-c", "import evalkit.commands.compare, evalkit.compare, evalkit.store"]
    else:
        argv = [sys.executable, "-m", "evalkit", "compare", str(a), str(b), "--format", "json"]
    rss = peak_rss_mb(argv)
    out = {
        "what": args.what,
        "samples_per_run": args.samples,
        "prompt_kb": args.prompt_kb,
        "input_mb": round(size / 2**20, 1),
        "peak_rss_mb": round(rss, 1),
        "rss_over_input": round(rss / (size / 2**20), 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
