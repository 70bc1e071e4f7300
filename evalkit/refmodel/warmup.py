"""Kernel warm-up: compile FLA's autotuned Triton kernels before the curriculum clock starts.

Run as `python -m evalkit.refmodel.warmup RANK/N SPEC_JSON` for one helper process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.refmodel.architecture import build_model
from evalkit.refmodel.decoder import Decoder
from evalkit.refmodel.settings import Settings

if TYPE_CHECKING:
    import torch

# kernel warm-up: compile FLA's autotuned Triton kernels before the curriculum clock starts
#
# The first training run lost 253 s of its 8.4-minute budget to autotuning at step 1 (every
# config of every kernel is compiled once), so the wall-clock curriculum skipped two stages. Now
# one forward+backward per stage shape runs before the clock starts, and helper processes compile
# the same kernels at the same time, each starting at a different config; Triton's on-disk cache
# is shared, so each config is compiled about once and the main process mostly loads them.
# Measured on the H200 (results/reference-model/recipe.json → kernel_warmup): 237.7 s with 7
# helpers, against 253 s spent at step 1 without them in the first run. Each process still
# benchmarks every config for its own shapes, and that benchmarking, not compilation, is the
# cost. The helpers stay (default on) so the shipped model's recipe reruns as it ran; what the
# warm-up fixes is that the curriculum's clock no longer pays for it (every stage now runs).

WARM_WORKER_FLAG = "--_warm-worker"
WARM_FIELDS = (
    "arch",
    "layers",
    "hidden",
    "heads",
    "head_dim",
    "intermediate",
    "conv_kernel",
    "tokens_per_step",
)


def rotate_autotune_configs(rank: int, n: int) -> None:
    """Benchmark (hence compile) each autotuned kernel's configs from offset rank/n of its list."""
    from triton.runtime import autotuner

    original = autotuner.Autotuner.prune_configs

    def rotated(self: Any, kwargs: dict[str, Any]) -> list[Any]:
        cfgs = list(original(self, kwargs))
        k = (rank * len(cfgs)) // max(n, 1)
        return cfgs[k:] + cfgs[:k]

    autotuner.Autotuner.prune_configs = rotated


def stage_shapes(s: Settings) -> list[tuple[int, int]]:
    """(rows, seq_len) of every curriculum stage: one batch shape per stage."""
    return [(max(1, s.tokens_per_step // L), L) for L in dict.fromkeys(s.stages)]


def training_autocast(device: torch.device) -> torch.autocast:
    """bf16 autocast on a GPU (as the training steps run), none on the CPU."""
    import torch

    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def warm_kernels(model: Any, s: Settings, vocab: int, device: torch.device, autocast: torch.autocast) -> None:
    """One forward+backward per stage shape on random ids; gradients are discarded."""
    import torch

    for rows, L in stage_shapes(s):
        ids = torch.randint(0, vocab, (rows, L), device=device)
        with autocast:
            logits = model(input_ids=ids, use_cache=False).logits
        logits.float().logsumexp(-1).mean().backward()
        model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()


def helper_command(
    rank: int, n: int, spec: dict[str, Any], script: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of helper `rank` of `n`: the training script with the internal flag
    (the way the trainer itself was started), or without one this package run as a module, its
    root first on the path so that a checkout that is not installed works as well."""
    args = [f"{rank}/{n}", json.dumps(spec)]
    if script is not None:
        return [sys.executable, str(script), WARM_WORKER_FLAG, *args], dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return [sys.executable, "-m", "evalkit.refmodel.warmup", *args], env


def start_warm_helpers(
    s: Settings, vocab: int, n: int, log_dir: Path, script: Path | None = None
) -> list[Any]:
    """`n` helper processes (ranks 1..n of n+1) that compile the kernels alongside the trainer."""
    spec = {"vocab": vocab, "stages": list(s.stages), **{k: getattr(s, k) for k in WARM_FIELDS}}
    procs = []
    for rank in range(1, n + 1):
        argv, env = helper_command(rank, n + 1, spec, script)
        with open(log_dir / f"warm-helper-{rank}.log", "w") as f:
            procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env))
    return procs


def stop_warm_helpers(procs: list[Any]) -> None:
    """Stop the helpers (they may still be benchmarking)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except Exception:  # noqa: BLE001
            p.kill()


def warm_worker_main(rank_of: str, spec_json: str) -> int:
    """Entry point of one helper: build the same model and run the warm-up shapes on the GPU."""
    import torch

    rank, n = (int(x) for x in rank_of.split("/"))
    rotate_autotune_configs(rank, n)
    spec = json.loads(spec_json)
    vocab = spec.pop("vocab")
    device = torch.device(spec.pop("device", "cuda"))
    s = Settings(stages=tuple(spec.pop("stages")), **spec)
    model = build_model(s, vocab).to(device)
    autocast = training_autocast(device)
    t = time.time()
    warm_kernels(model, s, vocab, device, autocast)
    print(f"helper {rank}/{n}: training shapes compiled in {time.time() - t:.1f}s", flush=True)
    # then what the final quick evaluation runs: an fp32 prefill and cached decode steps
    model = model.float().eval()
    torch.backends.cuda.matmul.allow_tf32 = False
    Decoder(model, device).generate(torch.randint(0, vocab, (300,)).tolist(), 3, set())
    print(f"helper {rank}/{n}: evaluation path compiled, {time.time() - t:.1f}s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(warm_worker_main(sys.argv[1], sys.argv[2]))
