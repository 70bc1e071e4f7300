"""Wall time per arm of the main job (scripts/main_job.sh), median of --repeats, optionally under a
competing load of --load busy processes (one core each), so the issue-15 targets (<= 60 s per arm
on 2 idle cores, within 2x of that under load) can be checked.

    python scripts/time_main_job.py --out results/main-job-cpu/timing [--repeats 3] [--workers 2] [--load 1]

Each repeat is a full main_job.sh into OUT/rep-K (run directories, compare, plan); timings.json
has every repeat's seconds per arm, their median, min and max, the commit, whether the tree was
clean and the load average around the runs. Not a test: the numbers depend on the machine."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^evalkit run --arm (\S+).*: ([0-9.]+) s wall$")


def _vcs() -> tuple[str, bool]:
    """(commit, whether the tree has changes outside results/), taken before anything is written."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout
    return commit, any(not line[3:].startswith("results/") for line in status.splitlines())


def _busy(n: int) -> list[subprocess.Popen]:
    """n processes that each keep one core busy (the competing load)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default=None, help="main_job.sh WORKERS: N or auto (default: auto)")
    ap.add_argument("--load", type=int, default=0, help="busy processes running during the job")
    args = ap.parse_args()
    commit, dirty = _vcs()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.workers is not None:
        env["WORKERS"] = str(args.workers)
    seconds: dict[str, list[float]] = {}
    load_before = os.getloadavg()
    hogs = _busy(args.load)
    try:
        for k in range(args.repeats):
            rep = out / f"rep-{k}"
            subprocess.run(["bash", str(ROOT / "scripts/main_job.sh"), str(rep)], check=True, env=env,
                           cwd=ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
            for line in (rep / "timings.txt").read_text().splitlines():
                m = LINE.match(line)
                if m:
                    seconds.setdefault(m[1], []).append(float(m[2]))
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    summary = {
        arm: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "runs_s": v}
        for arm, v in seconds.items()
    }
    meta = {
        "command": " ".join(["python", *sys.argv]),
        "git_commit": commit,
        "dirty_tree": dirty,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "workers": args.workers or "auto (main_job.sh's default)",
        "competing_busy_processes": args.load,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    (out / "timings.json").write_text(json.dumps({**meta, "arms": summary}, indent=2) + "\n")
    print(json.dumps({**meta, "arms": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
