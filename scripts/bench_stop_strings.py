#!/usr/bin/env python
"""Host time of the engine's stop-string check in a decode step (`evalkit/engine/stops.py`): the
tail decoded after every token against only after tokens that can end a stop string.

The generated streams are GSM8K test answers as a model that learnt the 8-shot format writes them
(the answer, then "\\n\\nQuestion: ..."), tokenized by the reference model's tokenizer (byte-level
BPE); --sequences of them step together, as a decode batch does, each until it stops or reaches
--max-new-tokens. Both ways must stop every stream at the same token.

    python scripts/bench_stop_strings.py --out results/bench/stop-strings-cpu [--repeats 5]

Writes bench_stop_strings.json: per stop set and way, µs per check, ms per decode step at the
batch size (medians of --repeats, with min and max), tails decoded, the commit and the machine."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evalkit.bench.harness import git_state  # noqa: E402
from evalkit.engine.stops import StopStrings  # noqa: E402
from evalkit.json_tokenizer import JsonTokenizer  # noqa: E402

STOP_SETS = {
    "gsm8k": ["Question:", "</s>", "<|im_end|>"],
    "gsm8k_cot": ["Q:", "</s>", "<|im_end|>", "\n\n"],
}


def streams(tokenizer, n: int, max_new: int) -> list[list[int]]:
    rows = [json.loads(line) for line in (REPO / "evalkit/assets/gsm8k/test.jsonl").open()]
    nxt = [rows[(i + 1) % len(rows)]["question"] for i in range(len(rows))]
    texts = [r["answer"] + "\n\nQuestion: " + q for r, q in zip(rows, nxt)]
    return [tokenizer.encode(t, add_special_tokens=False)[:max_new] for t in texts[:n]]


def run(tokenizer, batch: list[list[int]], stops: list[str], filtered: bool) -> tuple[float, int, int, list]:
    """(seconds, checks, tails decoded, each stream's stop step) for the batch stepping together."""
    checker = StopStrings(tokenizer)
    tokens = [[0] * 8 for _ in batch]  # a prompt, then the tokens generated so far (as the engine's)
    live = list(range(len(batch)))
    stopped: list = [None] * len(batch)
    checks = 0
    start = time.perf_counter()
    n = 0
    while live:
        n += 1
        nxt = []
        for i in live:
            ids = batch[i]
            if n > len(ids):
                continue
            checks += 1
            tokens[i].append(ids[n - 1])
            if checker.completed(tokens[i], n, stops, filtered and n > 1):
                stopped[i] = n
            else:
                nxt.append(i)
        live = nxt
    return time.perf_counter() - start, checks, checker.tails_decoded, stopped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sequences", type=int, default=512)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokenizer", type=Path, default=Path("models/reference-model-v1"), help="in the repo")
    args = ap.parse_args()
    vcs = git_state()
    tokenizer = JsonTokenizer.from_folder(REPO / args.tokenizer)
    batch = streams(tokenizer, args.sequences, args.max_new_tokens)
    steps = max(len(s) for s in batch)
    res: dict = {
        "command": " ".join([sys.executable, *sys.argv]),
        "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
        "git": vcs,
        "sequences": len(batch),
        "tokens": sum(len(s) for s in batch),
        "tokenizer": str(args.tokenizer),
        "rows": [],
    }
    ways = ("every token", "filtered")
    for name, stops in STOP_SETS.items():
        times: dict[str, list[float]] = {w: [] for w in ways}
        last: dict[str, tuple] = {}
        for _ in range(args.repeats):  # the two ways alternate, so a busy machine slows both alike
            for way in ways:
                secs, checks, decoded, stopped = run(tokenizer, batch, stops, way == "filtered")
                times[way].append(secs)
                last[way] = (checks, decoded, stopped)
        for way in ways:
            checks, decoded, stopped = last[way]
            us = [t / checks * 1e6 for t in times[way]]
            row = {
                "stops": name,
                "way": way,
                "checks": checks,
                "tails_decoded": decoded,
                "streams_stopped": sum(s is not None for s in stopped),
                "us_per_check": {"median": statistics.median(us), "min": min(us), "max": max(us)},
                "ms_per_step_at_batch": statistics.median(us) * len(batch) / 1e3,
                "decode_steps": steps,
            }
            res["rows"].append(row)
            print(json.dumps(row))
        res[f"same_stops_{name}"] = last["every token"][2] == last["filtered"][2]
        print(name, "same stop steps:", res[f"same_stops_{name}"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_stop_strings.json").write_text(json.dumps(res, indent=1) + "\n")
    return 0 if all(res[f"same_stops_{n}"] for n in STOP_SETS) else 1


if __name__ == "__main__":
    sys.exit(main())
