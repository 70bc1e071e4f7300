"""The training run: tokenizer, data workers, kernel warm-up, the training loop, checkpoints,
then the quick evaluation, the suite choice and the model card."""

from __future__ import annotations

import csv
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
from evalkit.refmodel.curriculum import Curriculum, lr_at
from evalkit.refmodel.gdn_on_kda import gdn_route
from evalkit.refmodel.mamba2_mixer import route_note, verify_route
from evalkit.refmodel.mixture import gens, tokenizer_corpus
from evalkit.refmodel.quick_eval import kda_backend, quick_eval
from evalkit.refmodel.runlog import log
from evalkit.refmodel.settings import ANSWER_WEIGHT, CONTEXT_WEIGHT, Settings
from evalkit.refmodel.suite import choose_suite
from evalkit.refmodel.tokenizer import BOS, CHATML, PAD, SPECIALS, train_tokenizer
from evalkit.refmodel.warmup import (
    stage_shapes,
    start_warm_helpers,
    stop_warm_helpers,
    training_autocast,
    warm_kernels,
)


def train(s: Settings, out: Path, bundle: Path | None = None, helper_script: Path | None = None) -> None:
    """One bounded run into `out` (the budget counts from `runlog.started_at()`); `bundle`, when
    given, is kept current with everything written; `helper_script` starts the warm-up helpers
    (else `python -m evalkit.refmodel.warmup`)."""
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
    helpers = []
    n_helpers = s.warm_helpers if s.warm_helpers >= 0 else max(0, min(7, (os.cpu_count() or 2) // 2 - 1))
    gpu_present = s.device != "cpu" and (Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi"))
    if n_helpers and gpu_present and importlib.util.find_spec("fla") is not None:
        helpers = start_warm_helpers(s, int(math.ceil(s.vocab_size / 64) * 64), n_helpers, out, helper_script)
        log(f"{len(helpers)} kernel warm-up helper processes started")

    # -- text and tokenizer -------------------------------------------------------------------
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

    workers = s.workers if s.workers >= 0 else max(1, min(12, (os.cpu_count() or 4) - 3))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the BPE training used threads; the workers fork
    stream = BatchStream(workers, window=max(4, 3 * workers))  # fork before CUDA is initialised

    import numpy  # noqa: F401 - the workers need it; fail early if missing
    import torch
    import torch.nn.functional as F

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
    recipe.update(
        {
            "model": {"params": n_params, "bf16_bytes": 2 * n_params, "config": model.config.to_dict()},
            "tokenizer": {
                "type": "byte-level BPE, digits split individually",
                "vocab_size": vocab,
                "specials": SPECIALS,
                "chat_template": CHATML,
                "corpus_texts": len(corpus),
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
    )
    write_recipe()

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "A_log" in name or "dt_bias" in name else decay).append(p)
    opt_kw = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=s.lr,
        betas=s.betas,
        **opt_kw,
    )

    autocast = training_autocast(device)
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
    recipe["kernel_warmup"] = {
        "seconds": round(warm_s, 1),
        "ended_at_s": round(time.time() - t0, 1),
        "helpers": len(helpers),
        "helpers_exited": helpers_done,
        "shapes": stage_shapes(s),
    }
    write_recipe()

    train_start = time.time()
    train_end = budget_end - s.eval_seconds - s.save_seconds
    if train_end - train_start < 5:
        train_end = train_start + 5
        log("warning: the budget leaves almost no training time")
    curriculum = Curriculum(s, train_start, train_end)
    curve_f = open(out / "loss_curve.csv", "w", newline="")
    curve = csv.writer(curve_f)
    curve.writerow(
        [
            "step",
            "seconds",
            "stage",
            "seq_len",
            "lr",
            "loss_weighted",
            "loss_answer",
            "tokens_seen",
            "data_wait_s",
        ]
    )
    stages_log: list[dict[str, Any]] = []
    step = tokens = 0
    cur_stage = -1
    last_ckpt = last_print = time.time()
    ema_loss = ema_ans = None
    fam_counts: dict[str, int] = {}
    model.train()
    status = "finished"
    try:
        while True:
            now = time.time()
            si = curriculum.next(now)
            if si is None:
                break
            frac = curriculum.frac(now)
            L = s.stages[si]
            rows = max(1, s.tokens_per_step // L)
            if si != cur_stage:
                if stages_log:
                    stages_log[-1].update(end_step=step, end_s=round(now - t0, 1))
                stages_log.append(
                    {
                        "stage": si,
                        "seq_len": L,
                        "rows": rows,
                        "start_step": step,
                        "start_s": round(now - t0, 1),
                    }
                )
                log(f"stage {si}: {L} tokens x {rows} rows")
                if cur_stage >= 0:
                    save_checkpoint(
                        model, fast_tok, out, {"step": step, "tokens": tokens, "stage": cur_stage}, bundle
                    )
                    last_ckpt = time.time()
                cur_stage = si
            batch = stream.get(L, rows)
            L = batch["L"]  # a batch submitted before a stage change keeps its length
            for f_, c in batch["counts"].items():
                fam_counts[f_] = fam_counts.get(f_, 0) + c
            ids = torch.from_numpy(batch["ids"]).to(device, non_blocking=True)
            w = torch.from_numpy(batch["w"]).to(device, non_blocking=True)
            lr = lr_at(s, step, frac)
            for group in opt.param_groups:
                group["lr"] = lr
            with autocast:
                logits = model(input_ids=ids, use_cache=False).logits
            ce = F.cross_entropy(
                logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
            ).view(ids.shape[0], -1)
            wt = w[:, 1:]
            loss = (ce * wt).sum() / wt.sum().clamp_min(1e-6)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
            opt.step()
            step += 1
            tokens += ids.numel()
            if step % 10 == 0 or step < 20 or time.time() - last_print > 10:
                with torch.no_grad():
                    ans = wt == ANSWER_WEIGHT
                    la = float((ce * ans).sum() / ans.sum().clamp_min(1))
                lv = float(loss.detach())
                if not math.isfinite(lv):
                    raise FloatingPointError(f"loss is {lv} at step {step}")
                ema_loss = lv if ema_loss is None else 0.9 * ema_loss + 0.1 * lv
                ema_ans = la if ema_ans is None else 0.9 * ema_ans + 0.1 * la
                curve.writerow(
                    [
                        step,
                        round(time.time() - t0, 2),
                        si,
                        L,
                        f"{lr:.3e}",
                        f"{lv:.5f}",
                        f"{la:.5f}",
                        tokens,
                        round(stream.wait_s, 2),
                    ]
                )
                if time.time() - last_print > (2 if s.tiny else 10):
                    curve_f.flush()
                    el = time.time() - train_start
                    log(
                        f"step {step:6d} stage {si} L={L:5d} lr {lr:.2e} loss {ema_loss:.4f} answer-loss "
                        f"{ema_ans:.4f} | {tokens / el / 1e3:.0f}k tok/s, data wait {stream.wait_s / el:.0%}"
                    )
                    last_print = time.time()
            if time.time() - last_ckpt > s.checkpoint_every_s:
                save_checkpoint(model, fast_tok, out, {"step": step, "tokens": tokens, "stage": si}, bundle)
                last_ckpt = time.time()
    except KeyboardInterrupt:
        status = "interrupted"
        log("interrupted: saving what there is")
    except Exception as exc:  # noqa: BLE001 - keep the partial model and say why
        status = f"failed at step {step}: {type(exc).__name__}: {exc}"
        log(status)
        traceback.print_exc()
    finally:
        stream.close()
        curve_f.close()
        stop_warm_helpers(helpers)
    if stages_log:
        stages_log[-1].update(end_step=step, end_s=round(time.time() - t0, 1))
    train_s = time.time() - train_start
    log(
        f"training done: {step} steps, {tokens / 1e6:.1f}M tokens in {train_s:.0f}s "
        f"(data wait {stream.wait_s:.0f}s); status: {status}"
    )
    recipe.update(
        status=status,
        steps=step,
        tokens=tokens,
        train_seconds=round(train_s, 1),
        data_wait_seconds=round(stream.wait_s, 1),
        stages=stages_log,
        rows_per_family=fam_counts,
        final_loss_weighted=ema_loss,
        final_loss_answer=ema_ans,
    )
    write_recipe()
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    if finite or not (out / "model" / "config.json").is_file():
        model_dir = save_checkpoint(
            model, fast_tok, out, {"step": step, "tokens": tokens, "status": status}, bundle
        )
    else:  # keep the last good checkpoint rather than overwrite it with non-finite weights
        model_dir = out / "model"
        log("weights are not finite: keeping the last checkpoint")
        recipe["status"] = status + " (non-finite weights; model/ is the last finite checkpoint)"
    size = (model_dir / "model.safetensors").stat().st_size
    recipe["checkpoint_bytes"] = size
    write_recipe()
    log(f"saved {model_dir} (model.safetensors {size / 2**20:.1f} MiB)")
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()

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
    recipe["total_seconds"] = round(time.time() - t0, 1)
    write_recipe()
    write_card(out, recipe, evald)
    write_bundle(out, bundle)
    log(f"done in {time.time() - t0:.0f}s: {out}")
