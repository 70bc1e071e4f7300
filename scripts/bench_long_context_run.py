#!/usr/bin/env python
"""A long-context `evalkit run` end to end: how much of the engine's own prompt throughput survives
document building. The same run three ways on one loaded engine:

- serial: docs built one at a time in this process, no prompt cache (before issue 15);
- cold: docs built by worker processes, then asked of the engine, written to a fresh cache;
- warm: the same run again, docs read from that cache.

    python scripts/bench_long_context_run.py --out results/bench/long-context-run-h200      # H200
    python scripts/bench_long_context_run.py --out /tmp/lc --device cpu --model CKPT --lengths 512 \
        --limit 2 --tasks passkey --max-new-tokens 4                                       # CPU smoke
    python scripts/bench_long_context_run.py --out /tmp/lc --stub --limit 8 --repeats 3 \
        --modes cold,warm                                     # the pipeline alone, on any CPU box

Per mode: run wall time, prompt tokens prefilled, the engine's prefill and decode time, end-to-end
prompt tok/s and its ratio to the engine's own (the issue's goal: >= 0.8), the pipeline's own time
(wall minus the engine's prefill and decode) per million prompt tokens, and whether the samples equal
the first mode's. With --repeats N every mode runs N times (cold clears the prompt cache each time)
and the figures are medians. `--stub` swaps the engine for `evalkit.bench.stub_engine` (canned
answers, no model): wall time is then the pipeline alone; `--stub-tok-s R` also has it sleep as a
GPU prefilling R tokens/s would (the CPU stays free), so the overlap of document building with the
engine shows on a CPU box. The streaming timeline: `first_request_s` / `last_request_s` (seconds from
the run's start until the engine got its first / last prompt) and `prefill_s_before_last_request`
(engine prefill done while documents were still coming: the overlap). `--no-stream` builds every
document before asking the engine (the run before streaming; same samples). Writes
bench_long_context_run.json under --out (run dirs and the cache too)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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

    def generate_stream(self, feed, on_result):
        self.inner.generate_stream(feed, on_result)

    def close(self):
        pass


def samples(out: Path) -> dict:
    """Every sample of a run by key, all fields but the wall-clock timings."""
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return {
        (r["task"], str(r["doc_id"]), r["length"]): {k: v for k, v in r.items() if k != "timings"}
        for r in rows
    }


def make_setup(args):
    """(backend, engine, tokenizer, model, arm): the real engine, or the stub with the model's tokenizer."""
    from evalkit.runner import setup as su

    if not args.stub:
        setup = su.local_setup(args.model, args.arm, None, args.device, None)
        return setup.backend, setup.backend.engine, setup.tokenizer, setup.model, setup.arm
    from evalkit.backends.local import LocalBackend
    from evalkit.bench.stub_engine import StubEngine
    from evalkit.model.checkpoint import load_tokenizer, resolve_model_path

    model = args.model or str(su.default_model()[0])
    tok = load_tokenizer(resolve_model_path(model))
    backend = LocalBackend(engine=StubEngine(tok, prefill_tok_s=args.stub_tok_s))
    return backend, backend.engine, tok, {"path": model, "engine": "stub"}, {"label": "stub"}


class Timeline:
    """When the engine got each prompt (seconds from `start`) and how much prefill it had done by then."""

    def __init__(self, engine) -> None:
        self.engine, self.start, self.adds = engine, time.perf_counter(), []
        self.inner = engine.add_request
        engine.add_request = self.add_request  # this instance only; `close` puts it back

    def add_request(self, *a, **k):
        self.adds.append((time.perf_counter() - self.start, self.engine.stats["prefill_s"]))
        return self.inner(*a, **k)

    def close(self, prefill_s0: float) -> dict:
        del self.engine.add_request
        if not self.adds:
            return {}
        return {
            "first_request_s": round(self.adds[0][0], 3),
            "last_request_s": round(self.adds[-1][0], 3),
            "prefill_s_before_last_request": round(self.adds[-1][1] - prefill_s0, 3),
        }


def run_mode(args, mode: str, out: Path, cache: Path, backend, engine, tokenizer, model, arm) -> dict:
    """One run of `mode` into out/mode (cold starts from an empty prompt cache)."""
    from evalkit.runner import RunSpec, run_evaluation
    from evalkit.runner import setup as su
    from evalkit.tasks.registry import parse_lengths

    env = {k: v.format(cache=cache) for k, v in MODES[mode].items()}
    if args.workers and mode != "serial":
        env["EVALKIT_PROMPT_WORKERS"] = args.workers
    if mode == "cold":
        shutil.rmtree(cache, ignore_errors=True)
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
        gold_logprob=args.gold_logprob,
        stream=not args.no_stream,
        manifest={
            **su.base_manifest_fields(sys.argv),
            "model": model,
            "arm": arm,
            "backend": backend.describe(),
        },
    )
    before = dict(engine.stats)
    timeline = Timeline(engine)
    try:
        outcome = run_evaluation(spec, backend, tokenizer, progress=False)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        when = timeline.close(before["prefill_s"])
    tokens = engine.stats["prefill_tokens"] - before["prefill_tokens"]
    prefill_s = engine.stats["prefill_s"] - before["prefill_s"]
    decode_s = engine.stats["decode_s"] - before["decode_s"]
    engine_tok_s = tokens / max(prefill_s, 1e-9)
    e2e_tok_s = tokens / max(outcome.wall_s, 1e-9)
    pipeline_s = outcome.wall_s - prefill_s - decode_s
    return {
        "env": env,
        "wall_s": round(outcome.wall_s, 3),
        "prompt_tokens": tokens,
        "engine_prefill_s": round(prefill_s, 3),
        "engine_decode_s": round(decode_s, 3),
        "pipeline_s": round(pipeline_s, 3),
        "pipeline_s_per_M_prompt_tokens": round(pipeline_s / max(tokens / 1e6, 1e-9), 3),
        "engine_prompt_tok_s": round(engine_tok_s),
        "end_to_end_prompt_tok_s": round(e2e_tok_s),
        "ratio_to_engine": round(e2e_tok_s / max(engine_tok_s, 1e-9), 3),
        **when,
        "samples": outcome.stored,
    }


def median_of(runs: list[dict]) -> dict:
    """The runs' medians of every number (the other fields from the first run), plus the spread."""
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = statistics.median(r[k] for r in runs)
    out["repeats"] = len(runs)
    out["wall_s_all"] = [r["wall_s"] for r in runs]
    out["pipeline_s_per_M_all"] = [r["pipeline_s_per_M_prompt_tokens"] for r in runs]
    return out


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--repeats", type=int, default=1, help="runs of each mode; the report gives medians")
    ap.add_argument("--gold-logprob", action="store_true", help="also teacher-force each reference answer")
    ap.add_argument("--stub", action="store_true", help="no model: the pipeline alone (stub engine)")
    ap.add_argument(
        "--stub-tok-s", type=float, default=None, help="the stub engine sleeps as a GPU of this prefill tok/s"
    )
    ap.add_argument("--no-stream", action="store_true", help="build every document before asking the engine")
    args = ap.parse_args(argv)

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
    backend, engine, tokenizer, model, arm = make_setup(args)
    report["load_s"] = round(time.perf_counter() - t, 2)
    modes = args.modes.split(",")
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        for rep in range(args.repeats):
            for mode in modes:
                got = run_mode(args, mode, out, cache, KeptOpen(backend), engine, tokenizer, model, arm)
                runs[mode].append(got)
                print(f"{mode} #{rep + 1}", json.dumps(got), flush=True)
                report["modes"][mode] = median_of(runs[mode])
                (out / "bench_long_context_run.json").write_text(json.dumps(report, indent=2))
    finally:
        backend.close()
    ran = [m for m in modes if (out / m / "samples.jsonl").is_file()]
    if len(ran) > 1:
        ref = samples(out / ran[0])
        report["samples_equal_to_" + ran[0]] = {m: samples(out / m) == ref for m in ran[1:]}
    (out / "bench_long_context_run.json").write_text(json.dumps(report, indent=2))
    for mode, r in report["modes"].items():
        print(
            f"{mode}: wall {r['wall_s']:.2f} s, prefill {r['engine_prefill_s']:.2f} s, "
            f"pipeline {r['pipeline_s_per_M_prompt_tokens']:.3f} s/M prompt tokens, "
            f"ratio {r['ratio_to_engine']:.3f}, first prompt to the engine at "
            f"{r.get('first_request_s', float('nan')):.2f} s (median of {r['repeats']})"
        )
    print(json.dumps({k: v for k, v in report.items() if k.startswith("samples_equal")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
