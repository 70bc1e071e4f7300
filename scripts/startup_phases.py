"""Where one `evalkit run` process spends its start-up, phase by phase, in wall-clock seconds: the
CLI's own path, with timers wrapped around the functions each phase is (no profiler, whose
overhead inflates Python-heavy parts several-fold).

    python scripts/startup_phases.py --out phases.json -- --arm fp16 --limit 1 --out /tmp/r

Phases: the imports the CLI needs before setting up (torch with evalkit's arm and kernels), the
set-up (tokenizer, weights, engine: pools, CUDA graphs), the evaluation up to its first request
reaching the engine (tasks, datasets, prompt building), the first engine step (on a GPU, Triton's
first launches: compilation or its cache), and the remainder. Python's own start-up before this
script runs is not counted (the difference from a process's wall time is it plus the exit).
Not a test: the numbers depend on the machine and its load."""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
MARKS: list[tuple[str, float]] = []  # (event, seconds since T0), in order
# (module, attribute, label): the function each phase is, wrapped where the caller looks it up
TARGETS = [
    ("evalkit.runner.setup", "local_setup", "set-up"),
    ("evalkit.model.loader", "load_tokenizer", "tokenizer"),
    ("evalkit.engine.llm_engine", "load_model", "model load (weights, tokenizer)"),
    ("evalkit.runner", "run_evaluation", "evaluation"),
]


def _wrap(module: str, attr: str, label: str) -> None:
    mod = importlib.import_module(module)
    fn = getattr(mod, attr)

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        MARKS.append((f"{label} start", time.perf_counter() - T0))
        try:
            return fn(*args, **kwargs)
        finally:
            MARKS.append((f"{label} end", time.perf_counter() - T0))

    setattr(mod, attr, timed)


def _first_step() -> None:
    """Marks around the engine's first step (the first request's prefill)."""
    from evalkit.engine.llm_engine import LLMEngine

    step = LLMEngine.step

    @functools.wraps(step)
    def timed(self, *args, **kwargs):
        if getattr(self, "_timed_first", False):
            return step(self, *args, **kwargs)
        self._timed_first = True
        MARKS.append(("first engine step start", time.perf_counter() - T0))
        try:
            return step(self, *args, **kwargs)
        finally:
            if self.model.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            MARKS.append(("first engine step end", time.perf_counter() - T0))

    LLMEngine.step = timed


def main() -> int:
    argv = sys.argv[1:]
    if "--out" not in argv or "--" not in argv:
        sys.exit("usage: startup_phases.py --out FILE.json -- EVALKIT_RUN_ARGS")
    split = argv.index("--")
    out = Path(argv[argv.index("--out") + 1])
    run_args = argv[split + 1 :]
    from evalkit.cli import main as cli_main

    MARKS.append(("evalkit.cli imported", time.perf_counter() - T0))
    import evalkit.arm  # noqa: F401 -- torch and evalkit's kernels: what the CLI imports first when it parses --arm

    MARKS.append(("torch + evalkit.arm imported", time.perf_counter() - T0))
    for target in TARGETS:
        _wrap(*target)
    _first_step()
    MARKS.append(("engine modules imported", time.perf_counter() - T0))
    rc = cli_main(["run", *run_args, "--no-progress"])
    MARKS.append(("done", time.perf_counter() - T0))
    marks = {name: round(t, 3) for name, t in MARKS}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"evalkit_run_args": run_args, "exit": rc, "marks_s": marks}, indent=2) + "\n")
    print(json.dumps(marks, indent=2), file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
