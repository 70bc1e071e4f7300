"""Wall time of `evalkit run` processes from the command line, split into the run's own evaluation
(the seconds its closing line reports) and the rest (start-up and exit), for one or more
environment variants run interleaved, so a before/after comparison shares the machine's state.

    python scripts/time_startup.py --out results/startup-cpu/timings.json --repeats 3 \
        --variant after --variant before:EVALKIT_TOKENIZER=transformers -- --arm fp16 --limit 1

Everything after `--` goes to `python -m evalkit run` (each process writes a fresh `--out` under a
temporary folder). The JSON has every process's seconds and, per variant, medians with min and
max. Not a test: the numbers depend on the machine and its load."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLOSING = re.compile(r"new samples \(.*, ([0-9.]+) s -> ")


def _variant(text: str) -> tuple[str, dict[str, str]]:
    """'NAME' or 'NAME:KEY=VALUE,KEY=VALUE' -> (name, environment additions)."""
    name, _, rest = text.partition(":")
    env = dict(pair.split("=", 1) for pair in rest.split(",") if pair)
    return name, env


def _one(run_args: list[str], env: dict[str, str], out: Path) -> dict[str, float]:
    """One `python -m evalkit run` process: its wall seconds and its reported evaluation seconds."""
    cmd = [sys.executable, "-m", "evalkit", "run", *run_args, "--out", str(out), "--no-progress"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"time_startup: {' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    m = CLOSING.search(proc.stdout)
    evaluation = float(m[1]) if m else float("nan")
    return {"wall_s": round(wall, 3), "evaluation_s": evaluation, "rest_s": round(wall - evaluation, 3)}


def _summary(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for key in ("wall_s", "evaluation_s", "rest_s"):
        v = [r[key] for r in rows]
        out[key] = {"median": round(statistics.median(v), 3), "min": min(v), "max": max(v)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variant", action="append", default=None, help="NAME[:KEY=VALUE,...] (repeatable)")
    ap.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then `evalkit run` arguments")
    args = ap.parse_args()
    run_args = [a for a in args.run_args if a != "--"]
    variants = [_variant(v) for v in (args.variant or ["default"])]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    tmp = Path(tempfile.mkdtemp(prefix="time_startup-"))
    try:
        for k in range(args.repeats):
            for name, env in variants:  # interleaved: a drift in the machine's load hits every variant
                runs[name].append(_one(run_args, env, tmp / f"{name}-{k}"))
                print(f"{name} repeat {k}: {runs[name][-1]}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    result = {
        "command": " ".join(["python", *sys.argv]),
        "evalkit_run_args": run_args,
        "git_commit": commit.stdout.strip() or None,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_after": os.getloadavg(),
        "variants": {
            name: {"env": env, "summary": _summary(runs[name]), "runs": runs[name]} for name, env in variants
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({n: v["summary"] for n, v in result["variants"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
