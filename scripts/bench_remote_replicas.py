#!/usr/bin/env python
"""Remote replicas: the same `evalkit run --server ...` against 1, 2, 4 `evalkit serve` processes on
one machine (issue 42, goal 6): run wall time, questions/s, speedup over one server, and whether the
samples are identical to one server's (they should be: the engine is batch-invariant).

    python scripts/bench_remote_replicas.py --out results/bench/replicas-h200 --replicas 1,2,4   # 1 GPU
    python -c "from evalkit.testing import build_tiny_checkpoint as b; b('/tmp/tiny', kind='hybrid')"
    python scripts/bench_remote_replicas.py --out /tmp/rr --device cpu --model /tmp/tiny --replicas 1,2 \
        --limit 4 --tasks gsm8k --max-new-tokens 8 --repeats 1                               # CPU smoke

For each K of --replicas: K `evalkit serve` processes are started together (same --model, --arm,
--device; each on its own free localhost port, `--port 0 --port-file`; their logs in
k<K>/server<i>.log), each waited for until its /v1/models answers (--start-timeout); then one
`evalkit run --server URL1 ... --server URLK` is timed (a subprocess, wall clock) --repeats times,
each into a fresh run dir k<K>/run<r>, the servers staying up between repeats; then the servers are
stopped (SIGTERM, wait, SIGKILL), also on an error or Ctrl-C. Server start-up is timed apart.
`--concurrency` is `evalkit run`'s: in-flight requests per server, so K servers get K times as many
(default 16: 16*K in all). On a GPU one server batches up to --max-num-seqs (256) sequences: with
fewer in flight the one-server baseline is starved, and part of the "speedup" is only the added
concurrency; pass e.g. --concurrency 256 for a fed baseline.

Long-context prompts are built once, untimed, into a prompt cache under --out that every run reads
(as bench_data_parallel.py). The default model is the embedded reference model (a pure-KDA model: K
copies fit one GPU easily). A model with MLA layers sizes its KV cache from the GPU memory left when
its server starts, so the first of K servers on one GPU may take what the others need.

Per K: start-up seconds, the run's wall seconds (median, min-max) and the run's own evaluation
seconds (its closing line), questions/s, speedup over the first K, the requests each server answered
(its log's closing line), and how many samples differ from the first K's first repeat (prompt hash,
response, tokens generated, finish reason, error; counted, not asserted). Writes
bench_remote_replicas.json and bench_remote_replicas.md under --out."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# evalkit from this checkout when it is not installed
try:
    from evalkit.bench import harness
except ImportError:
    sys.path.insert(0, str(REPO))
    from evalkit.bench import harness
harness.import_checkout()

CLOSING = re.compile(r"new samples \(.*, ([0-9.]+) s -> ")  # `evalkit run`'s last line (time_startup.py)
SERVED = re.compile(r"stopped after (\d+) requests")  # `evalkit serve`'s last line
NAME = "bench_remote_replicas"


def _death_signal():
    """Linux: a preexec_fn that has a child get SIGTERM when this script dies, even by SIGKILL (no
    server left holding a GPU); None elsewhere. libc is loaded here, not in the forked child."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # best effort: the finally clause stops the servers anyway
        return None
    return lambda: libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


DIE = _death_signal()


class Fleet:
    """K `evalkit serve` processes on free localhost ports; `stop()` leaves none behind."""

    def __init__(self, args, k: int, folder: Path, log: harness.Log) -> None:
        self.args, self.k, self.folder, self.log = args, k, folder, log
        self.procs: list[subprocess.Popen] = []
        self.ports: list[int] = []
        self.logs: list[Path] = []

    def command(self, port_file: Path) -> list[str]:
        a = self.args
        cmd = [sys.executable, "-m", "evalkit", "serve", "--model", a.model_path, "--arm", a.arm]
        cmd += ["--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file)]
        options = (("--device", a.device), ("--max-num-seqs", a.max_num_seqs), ("--kernels", a.kernels))
        for flag, value in options:
            if value is not None:
                cmd += [flag, str(value)]
        return cmd

    def start(self) -> float:
        """Start all K together, wait until each one's /v1/models answers; the seconds that took."""
        self.folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        port_files = []
        for i in range(self.k):
            port_file = self.folder / f"server{i}.port"
            port_file.unlink(missing_ok=True)
            port_files.append(port_file)
            self.logs.append(self.folder / f"server{i}.log")
            with open(self.logs[-1], "w") as fh:
                self.procs.append(
                    subprocess.Popen(
                        self.command(port_file),
                        cwd=REPO,
                        stdin=subprocess.DEVNULL,
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                        preexec_fn=DIE,
                    )
                )
        deadline = time.monotonic() + self.args.start_timeout
        for i, port_file in enumerate(port_files):
            while not (port_file.exists() and port_file.read_text().strip()):
                self._check(i, deadline)
                time.sleep(0.1)
            self.ports.append(int(port_file.read_text()))
            while not self._models_ok(self.ports[-1]):
                self._check(i, deadline)
                time.sleep(0.2)
        return time.perf_counter() - t0

    def _check(self, i: int, deadline: float) -> None:
        proc = self.procs[i]
        if proc.poll() is not None or time.monotonic() > deadline:
            why = f"exited {proc.returncode}" if proc.poll() is not None else "timed out"
            tail = self.logs[i].read_text(errors="replace")[-2000:]
            raise RuntimeError(f"evalkit serve #{i} did not become ready ({why}); {self.logs[i]}:\n{tail}")

    @staticmethod
    def _models_ok(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                return r.status == 200 and bool(json.loads(r.read()).get("data"))
        except (OSError, ValueError):
            return False

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def stop(self, grace_s: float = 30.0) -> list[int | None]:
        """SIGTERM every server, wait up to `grace_s` in all, SIGKILL what is left; the exit codes."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.log(f"evalkit serve pid {p.pid} ignored SIGTERM for {grace_s:.0f} s: killing it")
                p.kill()
                p.wait()
        return [p.returncode for p in self.procs]

    def served(self) -> list[int | None]:
        """Requests each server answered, from its closing log line (after stop())."""
        out = []
        for path in self.logs:
            m = SERVED.findall(path.read_text(errors="replace")) if path.exists() else []
            out.append(int(m[-1]) if m else None)
        return out


def run_command(args, urls: list[str], out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "evalkit", "run", "--model", args.model_path, "--arm", args.arm]
    for url in urls:
        cmd += ["--server", url]
    cmd += ["--tasks", args.tasks, "--limit", str(args.limit), "--seed", str(args.seed)]
    cmd += ["--concurrency", str(args.concurrency), "--out", str(out), "--no-progress"]
    for flag, value in (("--lengths", args.lengths), ("--max-new-tokens", args.max_new_tokens)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    return cmd


def one_run(args, urls: list[str], out: Path, env: dict) -> dict:
    """One timed `evalkit run --server ...` into a fresh `out`."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = run_command(args, urls, out)
    t0 = time.perf_counter()
    log_path = out.with_suffix(".log")
    with open(log_path, "w") as fh:
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            preexec_fn=DIE,
        )
    wall = time.perf_counter() - t0
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"evalkit run exited {proc.returncode}; {log_path}:\n{text[-2000:]}")
    m = CLOSING.search(text)
    rows = samples(out)
    return {
        "wall_s": round(wall, 3),
        "evaluation_s": float(m[1]) if m else None,
        "samples": len(rows),
        "errors": sum(1 for v in rows.values() if v[-1] is not None),
    }


def samples(out: Path) -> dict:
    """(task, doc_id, length) -> what a replica decides: prompt hash, response, tokens, finish, error.
    (`generated_ids` is not stored for --server runs.)"""
    return harness.read_samples(out, ("prompt_hash", "response", "n_generated", "finish_reason", "error"))


differing = harness.differing


def prebuild(args, cache: Path) -> float:
    """Build the long-context prompts once, untimed, with the tokenizer the runs load."""
    from evalkit.runner.setup import load_tokenizer

    return harness.prebuild_prompt_cache(
        cache,
        args.tasks.split(","),
        lambda: load_tokenizer(args.model_path),
        args.lengths,
        args.limit,
        args.seed,
    )


def environment(device: str | None) -> dict:
    from evalkit.store.manifest import library_versions

    env = {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "libraries": library_versions(),
    }
    if device is None or str(device).startswith("cuda"):  # after the servers: no context held meanwhile
        try:
            import torch

            if torch.cuda.is_available():
                env["gpu"] = torch.cuda.get_device_name(0)
                env["gpu_count"] = torch.cuda.device_count()
        except Exception as exc:  # noqa: BLE001 - the report is worth more than the GPU's name
            env["gpu"] = f"unavailable: {exc}"
    return env


def summarise(row: dict, base: dict | None) -> None:
    """Median and spread of a K's repeats, questions/s and the speedup over the first K (in place)."""
    walls = [r["wall_s"] for r in row["runs"]]
    evals = [r["evaluation_s"] for r in row["runs"] if r["evaluation_s"] is not None]
    row["wall_s"] = round(statistics.median(walls), 3)
    row["wall_s_min"], row["wall_s_max"] = min(walls), max(walls)
    row["evaluation_s"] = round(statistics.median(evals), 3) if evals else None
    n = row["runs"][0]["samples"]
    row["questions_per_s"] = round(n / max(row["wall_s"], 1e-9), 3)
    row["speedup"] = round(base["wall_s"] / max(row["wall_s"], 1e-9), 3) if base else 1.0
    if base and row["evaluation_s"] and base.get("evaluation_s"):
        row["speedup_evaluation"] = round(base["evaluation_s"] / row["evaluation_s"], 3)
    row["samples_differing"] = max(r["samples_differing"] for r in row["runs"])


def markdown(report: dict) -> str:
    a, env = report["args"], report.get("environment", {})
    machine = env.get("gpu") or f"CPU ({env.get('cpu_count')} cores)"
    lines = [
        "# evalkit serve replicas on one machine",
        "",
        f"`{report['command']}`",
        "",
        f"Machine: {machine}; device `{a['device'] or 'default'}`; {env.get('cpu_count')} CPUs; "
        f"commit {report['git']['commit']}{' (dirty)' if report['git']['dirty'] else ''}.",
        f"Model `{report['model']}`, arm `{a['arm']}`, tasks `{a['tasks']}`, lengths `{a['lengths']}`, "
        f"limit {a['limit']}, max new tokens {a['max_new_tokens']}; {a['concurrency']} requests in flight "
        f"per server; {a['repeats']} repeat(s) per K; prompts prebuilt in {report.get('prebuild_s')} s.",
        "",
        "| K | start-up s | run wall s, median (min-max) | run's evaluation s | questions/s | speedup "
        "| samples differing vs K="
        f"{report['baseline_k']} | errors | requests per server |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in report["rows"].items():
        if "wall_s" not in r:
            lines.append(f"| {k} | {r.get('error', 'not finished').splitlines()[0][:120]} |||||||| ")
            continue
        errors = sum(x["errors"] for x in r["runs"])
        lines.append(
            f"| {k} | {r['startup_s']:.1f} | {r['wall_s']:.2f} ({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f}) "
            f"| {r['evaluation_s']} | {r['questions_per_s']:.2f} | {r['speedup']:.2f} "
            f"| {r['samples_differing']} of {r['runs'][0]['samples']} | {errors} "
            f"| {r.get('requests_per_server')} |"
        )
    b = report["baseline_k"]
    lines += [
        "",
        "Run wall: the `evalkit run` process, start to exit (its start-up included); the run's evaluation "
        f"seconds are those its closing line reports. Speedup: K={b}'s median run wall over this K's. "
        f"Samples are compared with K={b}'s first repeat (prompt hash, response, tokens generated, finish "
        "reason, error); the worst repeat is shown.",
        "",
        "Libraries: " + ", ".join(f"{k} {v}" for k, v in sorted(env.get("libraries", {}).items())),
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--replicas", default="1,2,4", help="server counts K; the first is the baseline")
    ap.add_argument("--model", default=None, help="checkpoint (default: the embedded reference model)")
    ap.add_argument("--arm", default="fp32", help="the servers' state format (and the runs' arm label)")
    ap.add_argument("--device", default=None, help="the servers' --device (default: evalkit serve's)")
    ap.add_argument("--kernels", default=None, help="the servers' --kernels")
    ap.add_argument("--max-num-seqs", type=int, default=None, help="the servers' --max-num-seqs")
    ap.add_argument("--tasks", default="gsm8k,passkey,niah_single_1")
    ap.add_argument("--lengths", default="8k")
    ap.add_argument("--limit", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--data-dir", default=None, help="evalkit run's --data-dir (a local GSM8K copy)")
    ap.add_argument(
        "--concurrency",
        type=int,
        default=16,
        help="evalkit run's requests in flight per server (16*K in all)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per K; the report gives the median")
    ap.add_argument("--start-timeout", type=float, default=600, help="seconds for K servers to become ready")
    args = ap.parse_args(argv)
    args.replicas_list = [int(x) for x in args.replicas.split(",") if x.strip()]
    if not args.replicas_list or min(args.replicas_list) < 1 or args.repeats < 1 or args.concurrency < 1:
        ap.error("--replicas, --repeats and --concurrency must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    clock = harness.Clock()
    log = harness.Log(clock)
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.model:  # a local folder as an absolute path (the runs' cwd is the checkout), else a hub id
        local = Path(args.model).expanduser()
        args.model_path = str(local.resolve()) if local.exists() else args.model
    else:
        from evalkit.runner.setup import default_model

        args.model_path = default_model()[0]
    report: dict = {
        "command": " ".join(["python", *sys.argv]) if argv is None else " ".join(["python", __file__, *argv]),
        "args": {k: v for k, v in vars(args).items() if k not in ("replicas_list", "model_path")},
        "git": harness.git_state(REPO),
        "model": args.model_path,
        "baseline_k": args.replicas_list[0],
        "rows": {},
    }

    def save() -> None:
        (out / f"{NAME}.json").write_text(json.dumps(report, indent=2))
        (out / f"{NAME}.md").write_text(markdown(report))

    cache = out / "prompt-cache"
    report["prebuild_s"] = prebuild(args, cache)
    log("prompts prebuilt in", report["prebuild_s"], "s")
    env = {**os.environ, "EVALKIT_PROMPT_CACHE": str(cache)}
    reference: dict | None = None
    base: dict | None = None
    main_thread = threading.current_thread() is threading.main_thread()
    on_term = signal.getsignal(signal.SIGTERM) if main_thread else None
    if on_term is not None:  # a SIGTERM unwinds like Ctrl-C: the servers are stopped on the way out
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for k in args.replicas_list:
            row: dict = {"k": k, "runs": []}
            report["rows"][str(k)] = row
            fleet = Fleet(args, k, out / f"k{k}", log)
            try:
                row["startup_s"] = round(fleet.start(), 2)
                row["ports"] = fleet.ports
                log(f"K={k}: {k} server(s) ready in {row['startup_s']} s on ports {fleet.ports}")
                for r in range(args.repeats):
                    run_dir = out / f"k{k}" / f"run{r}"
                    got = one_run(args, fleet.urls, run_dir, env)
                    now = samples(run_dir)
                    reference = reference if reference is not None else now
                    got["samples_differing"] = differing(reference, now)
                    row["runs"].append(got)
                    log(f"K={k} repeat {r + 1}/{args.repeats}:", json.dumps(got))
                summarise(row, base)
                if base is None:
                    base, report["baseline_k"] = row, k
            except Exception as exc:  # noqa: BLE001 - one K's failure must not lose the others
                row["error"] = harness.error_text(exc, 3000)
                log(f"K={k} failed: {type(exc).__name__}: {exc}")
            except BaseException as exc:  # Ctrl-C, SIGTERM: recorded, the servers stopped, then out
                row["error"] = f"interrupted ({type(exc).__name__})"
                log(f"K={k} interrupted: stopping its servers")
                raise
            finally:
                row["server_exit_codes"] = fleet.stop()
                row["requests_per_server"] = fleet.served()
                save()
    finally:
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
        report["environment"] = environment(args.device)
        report["seconds"] = round(clock.elapsed(), 1)
        save()
    for k, r in report["rows"].items():
        if "wall_s" in r:
            log(
                f"K={k}: run {r['wall_s']:.2f} s ({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f}), "
                f"{r['questions_per_s']:.2f} questions/s, speedup {r['speedup']:.2f}, "
                f"{r['samples_differing']} samples differing, start-up {r['startup_s']:.1f} s"
            )
        else:
            log(f"K={k}: failed (see {NAME}.json)")
    log("wrote", out / f"{NAME}.json", "and", out / f"{NAME}.md")
    return 0 if all("error" not in r for r in report["rows"].values()) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the servers are stopped and the report saved by then
        print("bench_remote_replicas: interrupted", file=sys.stderr)
        sys.exit(130)
