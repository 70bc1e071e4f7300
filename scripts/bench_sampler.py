#!/usr/bin/env python
"""Cost of one decode step's token choice: the greedy argmax against the coupled Gumbel-max draw
(evalkit.engine.sampling.sample_rows), plain and with top-k / top-p, at Kimi-Linear's vocabulary.

    python scripts/bench_sampler.py --device cuda                        # H200: a few seconds
    python scripts/bench_sampler.py --device cpu --vocab 4096 --batch 1,8  # smoke test

Prints one JSON object per (batch, mode): milliseconds per step (median of --repeats)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evalkit.engine.sampling import SamplingParams, row_key, sample_rows  # noqa: E402

MODES = {
    "argmax": None,
    "gumbel": SamplingParams(temperature=0.7),
    "gumbel+top_k50": SamplingParams(temperature=0.7, top_k=50),
    "gumbel+top_p0.9": SamplingParams(temperature=0.7, top_p=0.9),
}


def timed(fn, device: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--vocab", type=int, default=163_840)
    ap.add_argument("--batch", default="1,8,64,256")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)  # as the engine runs on a CPU (evalkit.engine.cpu_threads)
    for b in [int(x) for x in args.batch.split(",")]:
        logits = torch.randn(b, args.vocab, device=args.device) * 4
        keys = [row_key(1234, 0, i) for i in range(b)]
        for mode, params in MODES.items():
            if params is None:
                fn = lambda x=logits: x.argmax(-1).tolist()  # noqa: E731
            else:
                fn = lambda x=logits, p=params, k=keys: sample_rows(x, [p] * len(k), k)  # noqa: E731
            fn()  # warm-up
            ms = timed(fn, args.device, args.repeats)
            print(
                json.dumps(
                    {"device": args.device, "vocab": args.vocab, "batch": b, "mode": mode, "ms": round(ms, 3)}
                )
            )


if __name__ == "__main__":
    main()
