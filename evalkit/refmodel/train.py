"""The training run: tokenizer, data workers, kernel warm-up, the training loop, checkpoints,
then the quick evaluation, the suite choice and the model card."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import shutil
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evalkit.refmodel import runlog
from evalkit.refmodel.architecture import DESCRIPTIONS, build_model
from evalkit.refmodel.arithmetic import essay_sentences_for_training
from evalkit.refmodel.batches import WORKER, BatchStream, calibrate
from evalkit.refmodel.bundle import write_bundle
from evalkit.refmodel.card import plot_loss, write_card
from evalkit.refmodel.checkpoint import save_checkpoint
from evalkit.refmodel.curriculum import Curriculum
from evalkit.refmodel.gdn_on_kda import gdn_route
from evalkit.refmodel.mamba2_mixer import route_note, verify_route
from evalkit.refmodel.mixture import gens, tokenizer_corpus
from evalkit.refmodel.quick_eval import kda_backend, quick_eval
from evalkit.refmodel.runlog import log
from evalkit.refmodel.settings import ANSWER_WEIGHT, CONTEXT_WEIGHT, Settings
from evalkit.refmodel.suite import choose_suite
from evalkit.refmodel.tokenizer import BOS, CHATML, PAD, SPECIALS, train_tokenizer
from evalkit.refmodel.train_loop import LoopParts, LoopState, run_loop
from evalkit.refmodel.warmup import (
    stage_shapes,
    start_warm_helpers,
    stop_warm_helpers,
    training_autocast,
    warm_kernels,
)


def train(
    s: Settings,
    out: Path,
    bundle: Path | None = None,
    helper_script: Path | None = None,
    warm_only: bool = False,
) -> None:
    """One bounded run into `out` (the budget counts from `runlog.started_at()`); `bundle`, when
    given, is kept current with everything written; `helper_script` starts the warm-up helpers
    (else `python -m evalkit.refmodel.warmup`). `warm_only` stops after the kernel check and
    warm-up (and the helpers' evaluation kernels): Triton's on-disk caches then hold what a
    later run on the same machine would otherwise compile and autotune inside its budget."""
    t0 = runlog.started_at()
    out.mkdir(parents=True, exist_ok=True)
    runlog.log_to(out / "train.log")
    budget_end = t0 + s.minutes * 60
    g = gens()
    recipe: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "settings": asdict(s),
        "status": "starting",
    }

    def write_recipe() -> None:
        (out / "recipe.json").write_text(json.dumps(recipe, indent=1, default=str))

    assert s.seed >= g.TRAIN_SEED_MIN, "training seeds must be >= 1_000_000 (evaluation uses lower ones)"
    try:  # keep the log readable: no progress bars for every checkpoint write/load
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        pass
    log(f"settings: {json.dumps(asdict(s), default=str)}")
    helpers = _start_helpers(s, out, helper_script)
    tok, fast_tok, corpus, calib = _tokenizer_and_workers(s, g)
    vocab = tok.get_vocab_size()
    workers = s.workers if s.workers >= 0 else max(1, min(12, (os.cpu_count() or 4) - 3))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the BPE training used threads; the workers fork
    stream = BatchStream(workers, window=max(4, 3 * workers))  # fork before CUDA is initialised

    import numpy  # noqa: F401 - the workers need it; fail early if missing
    import torch

    dev_name = s.device if s.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(dev_name)
    torch.manual_seed(s.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    cfg_vocab = int(math.ceil(vocab / 64) * 64)
    model = build_model(s, cfg_vocab).to(device)
    ssd_check = verify_route(model, device)  # a Mamba2 model's kernel scan against torch's
    if ssd_check is not None:
        log(f"Mamba2 scan check: {json.dumps(ssd_check)}")
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"model: {DESCRIPTIONS[s.arch]}, {s.layers} layers, hidden {s.hidden}, {s.heads}x{s.head_dim} heads, "
        f"{n_params / 1e6:.2f}M params ({2 * n_params / 2**20:.1f} MiB bf16); KDA kernels: {kda_backend()}; "
        f"device {device}{' ' + torch.cuda.get_device_name(0) if device.type == 'cuda' else ''}; "
        f"{workers} data workers"
    )
    recipe.update(_recipe_of_setup(s, model, n_params, vocab, len(corpus), calib, device, ssd_check))
    write_recipe()
    opt = _optimizer(s, model, device)
    autocast = training_autocast(device)
    recipe["kernel_warmup"] = _warm_up(s, model, cfg_vocab, device, autocast, helpers, t0)
    write_recipe()
    if warm_only:
        _finish_warm_only(helpers, stream, budget_end, recipe)
        write_recipe()
        return

    train_start = time.time()
    train_end = _training_end(s, train_start, budget_end)
    curriculum = Curriculum(s, train_start, train_end)
    parts = LoopParts(
        s, model, opt, autocast, device, stream, curriculum, fast_tok, out, bundle, t0, train_start
    )
    try:
        state = run_loop(parts)
    finally:
        stream.close()
        stop_warm_helpers(helpers)
    recipe.update(_recipe_of_training(state, stream.wait_s, t0, train_start))
    write_recipe()
    model_dir = _save_final(model, fast_tok, out, state, bundle, recipe)
    write_recipe()
    del model, opt, parts
    if device.type == "cuda":
        torch.cuda.empty_cache()
    evald = _evaluate(s, out, model_dir, device, budget_end, recipe)
    recipe["total_seconds"] = round(time.time() - t0, 1)
    write_recipe()
    write_card(out, recipe, evald)
    write_bundle(out, bundle)
    log(f"done in {time.time() - t0:.0f}s: {out}")


def _training_end(s: Settings, train_start: float, budget_end: float) -> float:
    """When the curriculum clock stops: `train_seconds` after it started, or what the budget leaves
    after the evaluation and the save (at least 5 s), whichever comes first."""
    train_end = budget_end - s.eval_seconds - s.save_seconds
    if s.train_seconds is not None:
        if train_start + s.train_seconds > train_end:
            log(f"warning: the budget cuts the fixed training clock to {train_end - train_start:.0f}s")
        train_end = min(train_end, train_start + s.train_seconds)
    if train_end - train_start < 5:
        train_end = train_start + 5
        log("warning: the budget leaves almost no training time")
    return train_end


def _finish_warm_only(helpers: list, stream: BatchStream, budget_end: float, recipe: dict[str, Any]) -> None:
    """Let the helpers finish compiling (the evaluation's kernels too) until the budget ends."""
    stream.close()
    for p in helpers:
        try:
            p.wait(timeout=max(1.0, budget_end - time.time()))
        except Exception:  # noqa: BLE001 - out of budget: stop the rest
            break
    stop_warm_helpers(helpers)
    recipe["status"] = "warm-only"
    log(f"warm-only: stopping after the warm-up ({sum(p.returncode == 0 for p in helpers)} helpers finished)")


def _start_helpers(s: Settings, out: Path, helper_script: Path | None) -> list:
    """Processes that compile the training and evaluation kernels' autotune configs meanwhile
    (only where there is a GPU and FLA); none is also fine."""
    n_helpers = s.warm_helpers if s.warm_helpers >= 0 else max(0, min(7, (os.cpu_count() or 2) // 2 - 1))
    gpu_present = s.device != "cpu" and (Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi"))
    if not (n_helpers and gpu_present and importlib.util.find_spec("fla") is not None):
        return []
    helpers = start_warm_helpers(s, int(math.ceil(s.vocab_size / 64) * 64), n_helpers, out, helper_script)
    log(f"{len(helpers)} kernel warm-up helper processes started")
    return helpers


def _tokenizer_and_workers(s: Settings, g: Any) -> tuple[Any, Any, list, Any]:
    """The text and the tokenizer trained on it, and the data workers' globals (set before they
    fork): (tokenizer, its transformers form, the tokenizer corpus, the unit calibration)."""
    sentences = essay_sentences_for_training(g.training_rng(s.seed + 3 * 10**9), 4000)
    corpus = tokenizer_corpus(s, sentences)
    tok, fast_tok = train_tokenizer(s, corpus)
    vocab = tok.get_vocab_size()
    log(f"tokenizer: byte-level BPE, {vocab} tokens (asked {s.vocab_size}), from {len(corpus)} texts")
    calib = calibrate(s, tok, sentences)
    WORKER.update(
        settings=s,
        tok=tok,
        sentences=sentences,
        calib=calib,
        bos_id=tok.token_to_id(BOS),
        pad_id=tok.token_to_id(PAD),
    )
    return tok, fast_tok, corpus, calib


def _recipe_of_setup(
    s: Settings,
    model: Any,
    n_params: int,
    vocab: int,
    corpus_texts: int,
    calib: Any,
    device: Any,
    ssd_check: dict[str, Any] | None,
) -> dict[str, Any]:
    """The recipe's record of what the run trains: model, tokenizer, seeds, loss, environment."""
    import torch

    return {
        "model": {"params": n_params, "bf16_bytes": 2 * n_params, "config": model.config.to_dict()},
        "tokenizer": {
            "type": "byte-level BPE, digits split individually",
            "vocab_size": vocab,
            "specials": SPECIALS,
            "chat_template": CHATML,
            "corpus_texts": corpus_texts,
        },
        "seeds": {
            "rule": "all training text comes from evalkit.tasks.long_context.generators."
            "training_rng(seed), seed >= 1_000_000 (evaluation seeds are < 1_000_000 and use a "
            "different string prefix)",
            "batch_rows": f"row r of batch k: training_rng({s.seed} + k*4096 + r)",
            "tokenizer_corpus": f"training_rng({s.seed} + 1e9 + i), i < {s.tokenizer_docs}",
            "calibration": f"training_rng({s.seed} + 2e9 + ...)",
            "essay_sentences": f"training_rng({s.seed} + 3e9)",
            "torch_init": s.seed,
        },
        "loss": {"answer_weight": ANSWER_WEIGHT, "context_weight": CONTEXT_WEIGHT, "pad_weight": 0.0},
        "unit_calibration": calib,
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "kda_kernels": kda_backend(),
            "gdn_chunk": gdn_route(),
            "ssd_scan": route_note(model),
            "ssd_check": ssd_check,
            "device": str(device),
            "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else None,
            "cpus": os.cpu_count(),
            "host": platform.node(),
        },
    }


def _optimizer(s: Settings, model: Any, device: Any) -> Any:
    """AdamW, with no weight decay on vectors and the recurrent layers' decay parameters."""
    import torch

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "A_log" in name or "dt_bias" in name else decay).append(p)
    opt_kw = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=s.lr,
        betas=s.betas,
        **opt_kw,
    )


def _warm_up(
    s: Settings, model: Any, cfg_vocab: int, device: Any, autocast: Any, helpers: list, t0: float
) -> dict[str, Any]:
    """Compile every stage's kernels before the curriculum clock starts; the recipe's record of it."""
    t_warm = time.time()
    try:
        warm_kernels(model, s, cfg_vocab, device, autocast)
    except BaseException:
        stop_warm_helpers(helpers)
        raise
    warm_s = time.time() - t_warm
    helpers_done = sum(p.poll() == 0 for p in helpers)  # the rest go on to the evaluation's kernels
    log(
        f"kernel warm-up {warm_s:.1f}s for shapes {stage_shapes(s)} ({len(helpers)} helpers, "
        f"{helpers_done} exited); the curriculum clock starts now"
    )
    return {
        "seconds": round(warm_s, 1),
        "ended_at_s": round(time.time() - t0, 1),
        "helpers": len(helpers),
        "helpers_exited": helpers_done,
        "shapes": stage_shapes(s),
    }


def _recipe_of_training(state: LoopState, wait_s: float, t0: float, train_start: float) -> dict[str, Any]:
    """Close the last stage's record and log the loop's totals; the recipe's record of them."""
    if state.stages:
        state.stages[-1].update(end_step=state.step, end_s=round(time.time() - t0, 1))
    train_s = time.time() - train_start
    log(
        f"training done: {state.step} steps, {state.tokens / 1e6:.1f}M tokens in {train_s:.0f}s "
        f"(data wait {wait_s:.0f}s); status: {state.status}"
    )
    return {
        "status": state.status,
        "steps": state.step,
        "tokens": state.tokens,
        "train_seconds": round(train_s, 1),
        "data_wait_seconds": round(wait_s, 1),
        "stages": state.stages,
        "rows_per_family": state.rows_per_family,
        "final_loss_weighted": state.ema_loss,
        "final_loss_answer": state.ema_answer,
    }


def _save_final(
    model: Any, fast_tok: Any, out: Path, state: LoopState, bundle: Path | None, recipe: dict[str, Any]
) -> Path:
    """The final checkpoint, unless its weights are not finite (then the last good one stays)."""
    import torch

    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    if finite or not (out / "model" / "config.json").is_file():
        meta = {"step": state.step, "tokens": state.tokens, "status": state.status}
        model_dir = save_checkpoint(model, fast_tok, out, meta, bundle)
    else:  # keep the last good checkpoint rather than overwrite it with non-finite weights
        model_dir = out / "model"
        log("weights are not finite: keeping the last checkpoint")
        recipe["status"] = state.status + " (non-finite weights; model/ is the last finite checkpoint)"
    size = (model_dir / "model.safetensors").stat().st_size
    recipe["checkpoint_bytes"] = size
    log(f"saved {model_dir} (model.safetensors {size / 2**20:.1f} MiB)")
    return model_dir


def _evaluate(
    s: Settings, out: Path, model_dir: Path, device: Any, budget_end: float, recipe: dict[str, Any]
) -> dict[str, Any]:
    """The loss plot, the quick evaluation and the default suite it chooses (each failure logged,
    never fatal: the model is saved already); the evaluation's results."""
    try:
        plot_loss(out)
    except Exception as exc:  # noqa: BLE001
        log(f"no loss plot: {exc}")
    evald: dict[str, Any] = {}
    try:
        evald = quick_eval(model_dir, s, device, budget_end - 3, out)
    except Exception as exc:  # noqa: BLE001
        log(f"quick eval failed: {type(exc).__name__}: {exc}")
        traceback.print_exc()
    recipe["quick_eval"] = "quick_eval.json"
    suite = choose_suite(evald)
    if suite:
        (model_dir / "suite.json").write_text(json.dumps(suite, indent=1))
        log(f"default suite: {suite['tasks']} at {suite['lengths']}, {suite['limit']} docs each")
    recipe["default_suite"] = suite or "none chosen (no task between 30% and 90%): evalkit's built-in suite"
    return evald
