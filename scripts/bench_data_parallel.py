#!/usr/bin/env python
"""Data parallelism: the same `evalkit run` on one device and on several; generation time, speedup,
and whether the samples are identical (they must be: the engine is batch-invariant).

    python scripts/bench_data_parallel.py --out results/bench/dp-h200x2                  # 2 x H200
    python scripts/bench_data_parallel.py --out /tmp/dp --devices cpu,cpu --model CKPT --limit 4 \
        --tasks gsm8k --max-new-tokens 8                                                 # CPU smoke

The default model is the embedded reference model. Each configuration writes a run directory
under --out (one/, dp/), both from one prompt cache filled first; the generation phase
(backend.generate: after the prompts are built and the engines loaded) is timed apart from the
wall time. Writes bench_data_parallel.json."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # as bench_engine's runs
# evalkit from this checkout when it is not installed (also in spawned engine processes, which
# import this module again)
try:
    from evalkit.bench import harness
except ImportError:
    sys.path.insert(0, str(REPO))
    from evalkit.bench import harness
harness.import_checkout()


class TimedBackend:
    """A backend wrapper that times generate() (the engines' share of the run)."""

    def __init__(self, inner):
        self.inner, self.name, self.tokenizer, self.generate_s = inner, inner.name, inner.tokenizer, 0.0

    def describe(self):
        return self.inner.describe()

    def generate(self, requests, on_result):
        t = time.perf_counter()
        self.inner.generate(requests, on_result)
        self.generate_s += time.perf_counter() - t

    def close(self):
        self.inner.close()


def one_run(args, device: str, out: Path) -> dict:
    from evalkit.runner import RunSpec, run_evaluation
    from evalkit.runner import setup as su
    from evalkit.tasks.registry import parse_lengths

    t0 = time.perf_counter()
    setup = su.local_setup(args.model, args.arm, None, device, args.max_num_seqs)
    load_s = time.perf_counter() - t0
    backend = TimedBackend(setup.backend)
    tasks = args.tasks.split(",")
    spec = RunSpec(
        tasks=tasks,
        out_dir=out,
        lengths=parse_lengths(args.lengths) if args.lengths else None,
        limit=args.limit,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        manifest={
            **su.base_manifest_fields(sys.argv),
            "model": setup.model,
            "arm": setup.arm,
            "backend": backend.describe(),
        },
    )
    try:
        outcome = run_evaluation(spec, backend, setup.tokenizer, progress=False)
    finally:
        backend.close()
    return {
        "device": device,
        "load_s": round(load_s, 2),
        "generate_s": round(backend.generate_s, 2),
        "run_wall_s": round(outcome.wall_s, 2),
        "samples": outcome.stored,
        "errors": outcome.errors,
        "generated_tok_s": round(outcome.tokens_per_s, 1),
    }


def prebuild(args, cache: Path) -> float:
    """Build every prompt once into a fresh cache that both runs read, so that neither timed run
    includes building them and both hand the engines the same requests."""
    from evalkit.model.checkpoint import load_tokenizer, resolve_model_path
    from evalkit.runner import setup as su

    seconds = harness.prebuild_prompt_cache(
        cache,
        args.tasks.split(","),
        lambda: load_tokenizer(resolve_model_path(args.model or su.default_model()[0])),
        args.lengths,
        args.limit,
        args.seed,
    )
    os.environ["EVALKIT_PROMPT_CACHE"] = str(cache)  # the in-process runs read it
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--devices",
        default="cuda:0,cuda:1",
        help="the data-parallel devices; the first alone is the baseline",
    )
    ap.add_argument("--model", default=None, help="checkpoint (default: the embedded reference model)")
    ap.add_argument("--arm", default="fp32")
    ap.add_argument("--tasks", default="gsm8k,passkey,niah_single_1")
    ap.add_argument("--lengths", default="8k")
    ap.add_argument("--limit", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--max-num-seqs", type=int, default=None)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    devices = args.devices
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    report = {
        "command": " ".join(["python", *sys.argv]),
        "args": vars(args),
        "git": {"commit": commit.strip(), "dirty": bool(dirty.strip())},
    }
    report["prebuild_s"] = prebuild(args, out / "prompt-cache")
    report["one"] = one_run(args, devices.split(",")[0], out / "one")
    report["dp"] = one_run(args, devices, out / "dp")
    a, b = harness.read_samples(out / "one"), harness.read_samples(out / "dp")
    report["samples_identical"] = a == b
    report["samples_differing"] = harness.differing(a, b)
    report["speedup_generate"] = round(report["one"]["generate_s"] / max(report["dp"]["generate_s"], 1e-9), 3)
    report["speedup_run_wall"] = round(report["one"]["run_wall_s"] / max(report["dp"]["run_wall_s"], 1e-9), 3)
    (out / "bench_data_parallel.json").write_text(json.dumps(report, indent=2))
    print(
        json.dumps({k: report[k] for k in ("one", "dp", "samples_identical", "speedup_generate")}, indent=1)
    )
    return 0 if report["samples_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
