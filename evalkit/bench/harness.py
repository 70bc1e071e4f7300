"""The one harness of the benchmark and GPU scripts under `scripts/`: what each of them needs
before it measures anything, so that they differ only in what they measure.

- `import_checkout`: run from a checkout that is not installed (the GPU image) by mapping
  `kernels/` and `tasks/` into evalkit's namespace, as setup.py does on install;
- `git_state`: the commit a report was made from and whether the tree was clean;
- `Clock` and `Log`: every log line stamped with the seconds since the script started;
- `Budget`: the time left of a wall budget, on that clock;
- `Sections`: named sections run in order under the budget, a failing one recorded (its
  traceback in the report) without losing the others, the report saved after each;
- `prebuild_prompt_cache`, `read_samples`, `differing`: the end-to-end benches' untimed prompt
  building and their check that two runs decided the same samples.

A script finds this module before evalkit is importable with three lines (see any bench script):
import it, and on ImportError put the checkout first on `sys.path` and import it again."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[2]


def import_checkout(repo: Path = REPO, namespaces: Sequence[str] = ("kernels", "tasks")) -> bool:
    """Map `repo/kernels` and `repo/tasks` to `evalkit.kernels` and `evalkit.tasks` when they do
    not import (evalkit not installed); True when anything was mapped."""
    import evalkit

    mapped = False
    for folder in namespaces:
        name = f"evalkit.{folder}"
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        spec = importlib.util.spec_from_file_location(
            name, repo / folder / "__init__.py", submodule_search_locations=[str(repo / folder)]
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        setattr(evalkit, folder, mod)
        mapped = True
    return mapped


def git_state(repo: Path = REPO) -> dict[str, Any]:
    """{"commit": HEAD or None, "dirty": uncommitted changes}: what a report records. On a lent
    device the copied checkout's metadata can be stale: its scripts' notes say which commit ran."""

    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, cwd=repo, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    return {
        "commit": run("git", "rev-parse", "HEAD") or None,
        "dirty": bool(run("git", "status", "--porcelain")),
    }


class Clock:
    """Seconds since `t0` (by default now) on `timer`: a script passes the time taken at its first
    line, so that its budget counts its imports too."""

    def __init__(self, t0: float | None = None, timer: Callable[[], float] = time.time) -> None:
        self.timer = timer
        self.t0 = timer() if t0 is None else t0

    def elapsed(self) -> float:
        return self.timer() - self.t0


class Budget:
    """A wall budget of `seconds` on `clock`."""

    def __init__(self, seconds: float, clock: Clock) -> None:
        self.seconds, self.clock = seconds, clock

    @property
    def end(self) -> float:
        """When the budget runs out, on the clock's timer."""
        return self.clock.t0 + self.seconds

    def left(self) -> float:
        return self.seconds - self.clock.elapsed()


class Log:
    """`log(*parts)` prints `[<prefix><seconds>s] parts...` (flushed); `to_file` echoes later lines
    to a file as well."""

    def __init__(self, clock: Clock, prefix: str = "") -> None:
        self.clock, self.prefix = clock, prefix
        self.file: TextIO | None = None

    def to_file(self, path: Path) -> None:
        self.file = open(path, "a")  # noqa: SIM115 - open for the rest of the run

    def __call__(self, *parts: object) -> None:
        line = f"[{self.prefix}{self.clock.elapsed():7.1f}s] " + " ".join(str(p) for p in parts)
        print(line, flush=True)
        if self.file is not None:
            self.file.write(line + "\n")
            self.file.flush()


def error_text(exc: BaseException, traceback_chars: int) -> str:
    """What a report keeps of a failure: the exception on one line, then the traceback's tail."""
    return f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-traceback_chars:]}"


class Sections:
    """Named sections of one report, run in order. A section returning a value stores it under
    `report["sections"][name]`; one raising is recorded under `report["errors"][name]` and the
    next runs anyway; `save()` follows every section. With `skip_below_s`, a section is skipped
    (and recorded as skipped) once less than that is left of the budget; with `timings_key`, each
    section's seconds are kept under that key."""

    def __init__(
        self,
        report: dict[str, Any],
        save: Callable[[], None],
        budget: Budget,
        log: Log,
        *,
        skip_below_s: float | None = None,
        timings_key: str | None = "section_seconds",
        traceback_chars: int = 3000,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self.report, self.save, self.budget, self.log = report, save, budget, log
        self.skip_below_s, self.timings_key = skip_below_s, timings_key
        self.traceback_chars, self.on_error = traceback_chars, on_error
        report.setdefault("errors", {})

    def run(self, name: str, fn: Callable[[], Any]) -> None:
        if self.skip_below_s is not None and self.budget.left() < self.skip_below_s:
            self.report["errors"][name] = f"skipped: time budget exhausted ({self.budget.seconds:.0f} s)"
            self.log("SKIP", name)
            self.save()
            return
        self.log("==", name, f"({self.budget.left():.0f} s left)")
        t = time.time()
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - keep going: one section's failure must not lose the others
            self.report["errors"][name] = error_text(exc, self.traceback_chars)
            self.log(f"ERROR in {name}: {type(exc).__name__}: {exc}")
            if self.on_error is not None:
                self.on_error()
        else:
            if result is not None:
                self.report.setdefault("sections", {})[name] = result
        if self.timings_key:
            self.report.setdefault(self.timings_key, {})[name] = round(time.time() - t, 1)
        self.save()


def timed_engine_row(
    engine: Any, prompts: Sequence[Any], sampling: Any, device: str, use_tqdm: bool = False
) -> tuple[list, dict]:
    """One timed `engine.generate` after the caller's compile run, with the engine's counters and
    the peak memory reset first: (outputs, the row every engine benchmark reports: wall time,
    prefill and decode seconds, throughput and token counts, decode steps, batch, state pool,
    graphs, health flags). The one home of that timing, so every script's rows mean the same."""
    import torch

    on_cuda = str(device).startswith("cuda")
    engine.stats.update(
        prefill_tokens=0, prefill_s=0.0, decode_steps=0, decode_tokens=0, decode_s=0.0, max_batch=0
    )
    if on_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    outs = engine.generate(list(prompts), sampling, use_tqdm=use_tqdm)
    if on_cuda:
        torch.cuda.synchronize()
    st = engine.stats
    row: dict[str, Any] = {
        "wall_s": round(time.perf_counter() - t, 2),
        "prefill_s": round(st["prefill_s"], 2),
        "decode_s": round(st["decode_s"], 2),
        "prefill_tok_s": round(st["prefill_tokens"] / max(st["prefill_s"], 1e-9)),
        "decode_tok_s": round(st["decode_tokens"] / max(st["decode_s"], 1e-9)),
        "prefill_tokens": st["prefill_tokens"],
        "decode_tokens": st["decode_tokens"],
        "decode_steps": st["decode_steps"],
        "decode_step_ms": round(1000 * st["decode_s"] / max(st["decode_steps"], 1), 2),
        "max_batch": st["max_batch"],
        "state_pool_gib": round(engine.state.memory_bytes() / 2**30, 2),
        "cuda_graphs": engine.runner.use_graphs,
        "graph_error": engine.runner.graph_error,
        "flags": sorted({f for o in outs for f in o.flags}),
    }
    if on_cuda:
        row["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return outs, row


def token_agreement(tokens: Sequence[Sequence[int]], reference: Sequence[Sequence[int]]) -> dict[str, Any]:
    """How an arm's generations match the reference arm's, prompt by prompt: identical ones, and
    the mean fraction of positions with the same token."""
    pairs = list(zip(tokens, reference))
    agree = [sum(x == y for x, y in zip(a, b)) / max(len(b), 1) for a, b in pairs]
    return {
        "identical_generations_vs_fp32": f"{sum(list(a) == list(b) for a, b in pairs)}/{len(pairs)}",
        "mean_token_agreement_vs_fp32": round(sum(agree) / max(len(agree), 1), 4),
    }


def prebuild_prompt_cache(
    cache: Path,
    tasks: Sequence[str],
    tokenizer: Callable[[], Any],
    lengths: str | None,
    limit: int | None,
    seed: int,
) -> float:
    """Build every long-context prompt once into a fresh prompt cache (`EVALKIT_PROMPT_CACHE`), so
    that no timed run includes building them and every run is handed the same requests; gsm8k
    builds in no time and is left to the runs. `tokenizer` is called only when a task needs it.
    The variable is restored afterwards: the caller points its runs at `cache`. Returns seconds."""
    from evalkit.tasks.registry import get_task, parse_lengths

    shutil.rmtree(cache, ignore_errors=True)
    before = os.environ.get("EVALKIT_PROMPT_CACHE")
    os.environ["EVALKIT_PROMPT_CACHE"] = str(cache)
    t = time.perf_counter()
    try:
        tok = None
        for name in tasks:
            task = get_task(name)
            if task.default_lengths:
                tok = tok or tokenizer()
                wanted = parse_lengths(lengths) if lengths else None
                task.requests(tokenizer=tok, lengths=wanted, limit=limit, seed=seed)
    finally:
        if before is None:
            os.environ.pop("EVALKIT_PROMPT_CACHE", None)
        else:
            os.environ["EVALKIT_PROMPT_CACHE"] = before
    return round(time.perf_counter() - t, 2)


def read_samples(out: Path, fields: Sequence[str] = ("prompt_hash", "response")) -> dict[tuple, tuple]:
    """A run's samples.jsonl as (task, doc_id, length) -> the named fields (None where absent):
    what two runs of the same questions must agree on."""
    rows = [json.loads(x) for x in (Path(out) / "samples.jsonl").read_text().splitlines() if x.strip()]
    return {(s["task"], str(s["doc_id"]), s["length"]): tuple(s.get(f) for f in fields) for s in rows}


def differing(a: dict, b: dict) -> int:
    """Questions whose samples differ between two runs (one missing from either counts)."""
    return sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))
