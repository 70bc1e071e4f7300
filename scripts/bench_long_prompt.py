#!/usr/bin/env python
"""One 128k-token prompt at Kimi-Linear-48B dims, as `evalkit run` runs it (issue 42, goal 3: <= 5 s
at the arm's default store points).

    python scripts/bench_long_prompt.py --out results/bench/long-prompt-h200       # H200, ~4 min
    python scripts/bench_long_prompt.py --out /tmp/lp --smoke    # CPU, tiny model: checks it runs

The engine's defaults (batch-invariant forwards of the default 16,384-token budget, fp32 state
stored every 2,048 tokens; --state picks another format), one generated token, on a random bf16
48B model. Rows, each an engine of its own, timed --repeats times after a warm-up (median and
spread of the prefill seconds):
- "pieces": a forward folds as many store chunks as the budget holds, the state stored at each
  (the default, `evalkit.model.store_rounds`);
- "chunk per forward": one store chunk per forward (`chunks_per_forward=1`, the schedule before);
- "16k store points": the arm fp32@chunk=16384 (fewer store points: another arm, the figure the
  issue compared with).
The first two must compute the same numbers: the log-likelihood of the prompt's last 16 tokens is
compared for float equality (`same_numbers`). Writes bench_long_prompt.json (git commit, clean tree).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import bench_engine as be  # same folder: the random model and timing helpers
import torch

ROWS = [  # name, arm (STATE: --state), chunks_per_forward
    ("pieces", "STATE", None),
    ("chunk per forward", "STATE", 1),
    ("16k store points", "STATE@chunk=16384", None),
]


def run_row(loaded, prompt, arm: str, cpf, args, dev) -> dict:
    from evalkit.engine import LLMEngine

    kw = dict(device=str(dev), max_model_len=len(prompt) + 8, max_num_seqs=2)
    if args.budget:
        kw["max_num_batched_tokens"] = args.budget
    eng = LLMEngine(loaded, arm=arm, chunks_per_forward=cpf, **kw)
    try:
        be.warm(eng, [prompt[:64], prompt[64:128]], dev)
        times, steps = [], []
        for _ in range(args.repeats):
            eng.stats["prefill_steps"] = 0
            r, _ = be.timed_generate(eng, [prompt], 1, dev, tqdm=False)
            times.append(r["prefill_s"])
            steps.append(eng.stats["prefill_steps"])
        ll = eng.loglikelihood([(prompt[:-16], prompt[-16:])])[0][0]
        inv = eng.describe()["batch_invariance"]
        return {"arm": arm, "chunks_per_forward": cpf, "prefill_s": be.spread(times, digits=3),
                "forwards": steps[-1], "loglikelihood_last16": ll, "batch_invariance": inv}  # fmt: skip
    finally:
        eng.close()
        be.free_memory(dev)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", required=True)
    ap.add_argument("--len", type=int, default=131072, help="prompt tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=int, default=None, help="max_num_batched_tokens (default: the engine's)")
    ap.add_argument("--rows", default=",".join(r[0] for r in ROWS))
    ap.add_argument("--state", default="fp32", help="the arms' state format (default fp32, the engine's)")
    ap.add_argument("--arch", choices=["real", "tiny"], default="real")
    ap.add_argument(
        "--layers",
        type=int,
        default=None,
        help="the 48B model's first N layers (default 27; fewer where a GPU cannot hold it)",
    )
    ap.add_argument("--device", default=None)
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, 300 tokens, chunk 64, budget 256")
    args = ap.parse_args()
    wanted = args.rows.split(",")
    rows = [(name, arm.replace("STATE", args.state), cpf) for name, arm, cpf in ROWS if name in wanted]
    if args.smoke:
        args.arch, args.device, args.len, args.repeats, args.budget = "tiny", "cpu", 300, 1, 256
        rows = [(name, arm.replace("16384", "256") + ("@chunk=64" if "@" not in arm else ""), cpf)
                for name, arm, cpf in rows]  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    be.bootstrap_evalkit()
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    report: dict = {
        **be.report_header(dev, args),
        "rows": {},
        "errors": {},
    }
    loaded, report["model"] = be.build_model(argparse.Namespace(arch=args.arch, layers=args.layers), dev)
    report["model"]["layers"] = loaded.arch.num_hidden_layers
    prompt = be.make_prompts(1, loaded.arch.vocab_size, args.len, seed=3)[0][: args.len]
    report["prompt_len"] = len(prompt)
    for name, arm, cpf in rows:
        try:
            report["rows"][name] = run_row(loaded, prompt, arm, cpf, args, dev)
            be.log(f"{name}: {report['rows'][name]}")
        except Exception as exc:  # noqa: BLE001 - one row failing (e.g. out of memory) keeps the rest
            report["errors"][name] = f"{type(exc).__name__}: {exc}"
            be.log(f"{name} FAILED: {report['errors'][name]}")
        (out / "bench_long_prompt.json").write_text(json.dumps(report, indent=2, default=str))
    a, b = (report["rows"].get(n, {}).get("loglikelihood_last16") for n in ("pieces", "chunk per forward"))
    if a is not None and b is not None:
        report["same_numbers"] = a == b
        base = report["rows"]["chunk per forward"]["prefill_s"]["median"]
        report["pieces_speedup"] = round(base / report["rows"]["pieces"]["prefill_s"]["median"], 3)
    (out / "bench_long_prompt.json").write_text(json.dumps(report, indent=2, default=str))
    be.log(f"same numbers: {report.get('same_numbers')}; speed-up: {report.get('pieces_speedup')}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
