#!/usr/bin/env python
"""A long-context `evalkit run` end to end: how much of the engine's own prompt throughput survives
document building. The same run three ways on one loaded engine:

- serial: docs built one at a time in this process, no prompt cache (before issue 15);
- cold: docs built by worker processes, then asked of the engine, written to a fresh cache;
- warm: the same run again, docs read from that cache.

    python scripts/bench_long_context_run.py --out results/bench/long-context-run-h200      # H200
    python scripts/bench_long_context_run.py --out /tmp/lc --device cpu --model CKPT --lengths 512 \
        --limit 2 --tasks passkey --max-new-tokens 4                                       # CPU smoke

Per mode: run wall time, prompt tokens prefilled, the engine's prefill time, end-to-end prompt
tok/s and its ratio to the engine's own (the issue's goal: >= 0.8), and whether the samples equal
the serial run's. Writes bench_long_context_run.json under --out (run dirs and the cache too)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
MODES = {
    "serial": {"EVALKIT_PROMPT_WORKERS": "1", "EVALKIT_PROMPT_CACHE": "off"},
    "cold": {"EVALKIT_PROMPT_CACHE": "{cache}"},
    "warm": {"EVALKIT_PROMPT_CACHE": "{cache}"},
}


class KeptOpen:
    """The backend, shared by the modes: the runner's close() is deferred to the end."""

    def __init__(self, inner):
        self.inner, self.name, self.tokenizer = inner, inner.name, inner.tokenizer

    def describe(self):
        return self.inner.describe()

    def generate(self, requests, on_result):
        self.inner.generate(requests, on_result)

    def close(self):
        pass


def samples(out: Path) -> dict:
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return {(r["task"], str(r["doc_id"]), r["length"]): (r["prompt_hash"], r["response"]) for r in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=None, help="checkpoint (default: the embedded reference model)")
    ap.add_argument("--arm", default="fp32")
    ap.add_argument("--device", default=None)
    ap.add_argument("--tasks", default="passkey,niah_single_1")
    ap.add_argument("--lengths", default="32k,128k")
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument(
        "--workers", default=None, help="EVALKIT_PROMPT_WORKERS for cold/warm (default: cores - 1)"
    )
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()

    from evalkit.runner import RunSpec, run_evaluation
    from evalkit.runner import setup as su
    from evalkit.tasks.registry import parse_lengths

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "prompt-cache"
    shutil.rmtree(cache, ignore_errors=True)
    git = lambda *c: subprocess.run(["git", *c], cwd=REPO, capture_output=True, text=True).stdout.strip()  # noqa: E731
    report: dict = {
        "command": " ".join(["python", *sys.argv]),
        "args": vars(args),
        "git": {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))},
        "cpu_count": os.cpu_count(),
        "modes": {},
    }
    t = time.perf_counter()
    setup = su.local_setup(args.model, args.arm, None, args.device, None)
    report["load_s"] = round(time.perf_counter() - t, 2)
    backend, engine = KeptOpen(setup.backend), setup.backend.engine
    try:
        for mode in args.modes.split(","):
            env = {k: v.format(cache=cache) for k, v in MODES[mode].items()}
            if args.workers and mode != "serial":
                env["EVALKIT_PROMPT_WORKERS"] = args.workers
            saved = {k: os.environ.get(k) for k in ("EVALKIT_PROMPT_WORKERS", "EVALKIT_PROMPT_CACHE")}
            os.environ.update(env)
            shutil.rmtree(out / mode, ignore_errors=True)
            spec = RunSpec(
                tasks=args.tasks.split(","),
                out_dir=out / mode,
                lengths=parse_lengths(args.lengths),
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
            before = dict(engine.stats)
            try:
                outcome = run_evaluation(spec, backend, setup.tokenizer, progress=False)
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
            tokens = engine.stats["prefill_tokens"] - before["prefill_tokens"]
            prefill_s = engine.stats["prefill_s"] - before["prefill_s"]
            engine_tok_s = tokens / max(prefill_s, 1e-9)
            e2e_tok_s = tokens / max(outcome.wall_s, 1e-9)
            report["modes"][mode] = {
                "env": env,
                "wall_s": round(outcome.wall_s, 2),
                "prompt_tokens": tokens,
                "engine_prefill_s": round(prefill_s, 2),
                "engine_prompt_tok_s": round(engine_tok_s),
                "end_to_end_prompt_tok_s": round(e2e_tok_s),
                "ratio_to_engine": round(e2e_tok_s / max(engine_tok_s, 1e-9), 3),
                "samples": outcome.stored,
            }
            print(mode, json.dumps(report["modes"][mode]), flush=True)
            (out / "bench_long_context_run.json").write_text(json.dumps(report, indent=2))
    finally:
        setup.backend.close()
    ran = [m for m in args.modes.split(",") if (out / m / "samples.jsonl").is_file()]
    if len(ran) > 1:
        ref = samples(out / ran[0])
        report["samples_equal_to_" + ran[0]] = {m: samples(out / m) == ref for m in ran[1:]}
    (out / "bench_long_context_run.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k.startswith("samples_equal")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
