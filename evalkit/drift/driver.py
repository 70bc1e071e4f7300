"""One drift run end to end: teacher-forced modes, free running, then the run directory."""

from __future__ import annotations

import hashlib
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from evalkit.drift import rundir
from evalkit.drift.generate import compare_generations, generate_greedy
from evalkit.drift.session import DriftModel
from evalkit.drift.summarize import bucket_rows, state_rows, teacher_forced_summary
from evalkit.drift.teacher_forced import MODES, run_teacher_forced
from evalkit.errors import EvalkitError


@dataclass
class DriftConfig:
    arms: list[str]
    modes: list[str] = field(default_factory=lambda: list(MODES))
    chunk_size: int = 1024  # prefill mode: tokens per prefill call (one state rounding per chunk)
    decode_block: int = 256  # decode mode: tokens per lockstep block (logits memory, not numerics)
    generate: int = 0  # free running: greedy tokens per arm (0 = skip)
    prompt_length: int = 1024  # free running: the first tokens of the input are the prompt
    per_octave: int = 2  # position buckets per octave
    max_bytes: int = 256 << 20  # float64 scratch per metric slice
    title: str = ""


def tokens_sha256(tokens: torch.Tensor) -> str:
    return hashlib.sha256(tokens.to(torch.int64).cpu().numpy().tobytes()).hexdigest()


def _manifest(model: DriftModel, cfg: DriftConfig, input_info: dict, command: list[str] | None) -> dict:
    command = list(command) if command else ["evalkit", "drift", *sys.argv[1:]]
    try:
        from evalkit.store.manifest import base_manifest  # the fields every evalkit run records

        m = dict(base_manifest(command))
    except Exception:  # noqa: BLE001 - the drift run must not depend on the store being present
        from evalkit import __version__

        m = {
            "evalkit_version": __version__,
            "command": command,
            "hardware": {
                "machine": platform.machine(),
                "python": platform.python_version(),
                "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            },
            "libraries": {"torch": torch.__version__},
        }
    m["kind"] = "drift"
    m["model"] = model.describe()
    m["drift"] = {**asdict(cfg), "input": input_info}
    m["started_at"] = m.get("started_at") or _now()
    return m


def _now() -> str:
    try:
        from evalkit.store.manifest import now_utc

        return now_utc()
    except ImportError:
        return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def run_drift(
    model: DriftModel,
    tokens: torch.Tensor,
    cfg: DriftConfig,
    out_dir: str | Path,
    *,
    input_info: dict[str, Any] | None = None,
    command: list[str] | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    plots: bool = True,
    budgets: dict[str, float] | None = None,
) -> dict:
    """Measure, write the run directory, return the summary dict.

    `budgets` caps the seconds of each phase ("prefill", "decode", "generate"): a phase that runs
    out stops early and says so in the summary (`stopped_early`, the length reached)."""
    budgets = budgets or {}

    def deadline(phase: str) -> float | None:
        return time.perf_counter() + budgets[phase] if phase in budgets else None

    tokens = tokens.to(torch.long).reshape(-1).cpu()
    out = rundir.prepare(out_dir, overwrite)
    input_info = {**(input_info or {}), "length": int(tokens.numel()), "sha256": tokens_sha256(tokens)}
    manifest = _manifest(model, cfg, input_info, command)
    rundir.write_json(out / "manifest.json", manifest)
    summary: dict[str, Any] = {
        "kind": "drift",
        "title": cfg.title,
        "config": {
            "model": model.describe(),
            "arms": cfg.arms,
            "modes": cfg.modes,
            "chunk_size": cfg.chunk_size,
            "input": input_info,
            "generate": cfg.generate,
        },
        "teacher_forced": {},
        "free_running": None,
        "errors": [],
    }
    buckets, states = [], []
    for mode in cfg.modes:
        bar = _bar(show_progress, int(tokens.numel()), f"drift {mode}")
        tick = (lambda n, _L, b=bar: b.update(n)) if bar else None
        try:
            res = run_teacher_forced(
                model,
                tokens,
                cfg.arms,
                mode,
                chunk_size=cfg.chunk_size,
                decode_block=cfg.decode_block,
                per_octave=cfg.per_octave,
                max_bytes=cfg.max_bytes,
                progress=tick,
                deadline=deadline(mode),
            )
        except EvalkitError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep the other phases (e.g. out of memory in one mode)
            _record_error(summary, f"teacher-forced {mode}", exc)
            continue
        finally:
            if bar:
                bar.close()
        summary["teacher_forced"][mode] = teacher_forced_summary(res)
        buckets += bucket_rows(res)
        states += state_rows(res)
        _write_partial(out, summary, buckets, states)
    if cfg.generate > 0:
        try:
            _free_running(model, tokens, cfg, out, summary, show_progress, budgets.get("generate"))
        except EvalkitError:
            raise
        except Exception as exc:  # noqa: BLE001
            _record_error(summary, "free running", exc)
    _write_partial(out, summary, buckets, states)
    manifest["finished_at"] = _now()
    rundir.write_json(out / "manifest.json", manifest)
    if plots:
        from evalkit.drift.plots import plot_run

        plot_run(rundir.load_run(out), out)
    from evalkit.drift.report import drift_markdown

    (out / "summary.md").write_text(drift_markdown(out))
    return summary


def _free_running(
    model: DriftModel,
    tokens: torch.Tensor,
    cfg: DriftConfig,
    out: Path,
    summary: dict,
    show_progress: bool,
    budget: float | None,
) -> None:
    prompt = tokens[: max(1, min(cfg.prompt_length, tokens.numel()))]
    gens = {}
    per_arm = budget / (1 + len(cfg.arms)) if budget is not None else None
    for arm in ["fp32", *cfg.arms]:
        bar = _bar(show_progress, cfg.generate, f"generate {arm}")
        stop = time.perf_counter() + per_arm if per_arm is not None else None
        try:
            gens[arm] = generate_greedy(
                model,
                prompt,
                arm,
                cfg.generate,
                chunk_size=cfg.chunk_size,
                progress=bar.update if bar else None,
                deadline=stop,
            )
        finally:
            if bar:
                bar.close()
    ref = gens["fp32"]
    fr_arms = {arm: compare_generations(ref, gens[arm]) for arm in cfg.arms}
    summary["free_running"] = {
        "prompt_tokens": int(prompt.numel()),
        "n_tokens": cfg.generate,
        "reference": compare_generations(ref, ref),
        "arms": fr_arms,
    }
    rundir.write_json(
        out / "free_running.json",
        {
            "prompt_tokens": int(prompt.numel()),
            "tokens": {arm: g.tokens for arm, g in gens.items()},
            "arms": fr_arms,
        },
    )


def _record_error(summary: dict, phase: str, exc: BaseException) -> None:
    import traceback

    msg = f"{phase}: {type(exc).__name__}: {exc}"
    summary["errors"].append({"phase": phase, "error": msg, "traceback": traceback.format_exc()[-4000:]})
    print(f"evalkit drift: {msg} (recorded in summary.json; continuing)", file=sys.stderr, flush=True)


def _write_partial(out: Path, summary: dict, buckets: list[dict], states: list[dict]) -> None:
    """Write what exists so far, so a run killed in a later mode keeps the earlier ones."""
    rundir.write_json(out / "summary.json", summary)
    rundir.write_json(out / "buckets.json", buckets)
    rundir.write_csv(out / "buckets.csv", buckets)
    rundir.write_json(out / "states.json", states)
    rundir.write_csv(out / "states.csv", states)


def _bar(show: bool, total: int, desc: str):
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="tok", leave=False, dynamic_ncols=True)
