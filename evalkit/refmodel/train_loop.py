"""The curriculum's training loop: batches from the data workers, the weighted loss and the
optimizer step, the loss curve, a checkpoint at each stage change and every few minutes, until the
curriculum's clock runs out. An interrupt or a failure ends the loop, not the run: what was
trained is saved and evaluated all the same."""

from __future__ import annotations

import csv
import math
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.refmodel.checkpoint import save_checkpoint
from evalkit.refmodel.curriculum import Curriculum, lr_at
from evalkit.refmodel.runlog import log
from evalkit.refmodel.settings import ANSWER_WEIGHT, Settings

CURVE_COLUMNS = (
    "step",
    "seconds",
    "stage",
    "seq_len",
    "lr",
    "loss_weighted",
    "loss_answer",
    "tokens_seen",
    "data_wait_s",
)


@dataclass(frozen=True)
class LoopParts:
    """What the loop works with, made by `train` before the curriculum clock starts."""

    s: Settings
    model: Any
    opt: Any
    autocast: Any
    device: Any
    stream: Any  # batches.BatchStream
    curriculum: Curriculum
    fast_tok: Any
    out: Path
    bundle: Path | None
    t0: float  # the run's start (the budget's origin)
    train_start: float  # the curriculum clock's start


@dataclass
class LoopState:
    """What the loop has done so far: read after it stops, whatever stopped it."""

    step: int = 0
    tokens: int = 0
    stage: int = -1
    ema_loss: float | None = None
    ema_answer: float | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    rows_per_family: dict[str, int] = field(default_factory=dict)
    status: str = "finished"
    last_checkpoint: float = field(default_factory=time.time)
    last_print: float = field(default_factory=time.time)


def run_loop(parts: LoopParts) -> LoopState:
    """Train until the curriculum ends; an interrupt or an exception sets `status` instead of rising."""
    state = LoopState()
    with open(parts.out / "loss_curve.csv", "w", newline="") as curve_f:
        curve = csv.writer(curve_f)
        curve.writerow(list(CURVE_COLUMNS))
        parts.model.train()
        try:
            _train(parts, state, curve, curve_f)
        except KeyboardInterrupt:
            state.status = "interrupted"
            log("interrupted: saving what there is")
        except Exception as exc:  # noqa: BLE001 - keep the partial model and say why
            state.status = f"failed at step {state.step}: {type(exc).__name__}: {exc}"
            log(state.status)
            traceback.print_exc()
    return state


def _train(parts: LoopParts, state: LoopState, curve: Any, curve_f: Any) -> None:
    s = parts.s
    while True:
        now = time.time()
        si = parts.curriculum.next(now)
        if si is None:
            break
        frac = parts.curriculum.frac(now)
        rows = max(1, s.tokens_per_step // s.stages[si])
        if si != state.stage:
            _enter_stage(parts, state, si, rows, now)
        batch = parts.stream.get(s.stages[si], rows)
        length = batch["L"]  # a batch submitted before a stage change keeps its length
        for family, count in batch["counts"].items():
            state.rows_per_family[family] = state.rows_per_family.get(family, 0) + count
        lr = lr_at(s, state.step, frac)
        loss, ce, wt, ids = _step(parts, batch, lr)
        state.step += 1
        state.tokens += ids.numel()
        if state.step % 10 == 0 or state.step < 20 or time.time() - state.last_print > 10:
            _record(parts, state, curve, curve_f, (si, length, lr), loss, ce, wt)
        if time.time() - state.last_checkpoint > s.checkpoint_every_s:
            meta = {"step": state.step, "tokens": state.tokens, "stage": si}
            save_checkpoint(parts.model, parts.fast_tok, parts.out, meta, parts.bundle)
            state.last_checkpoint = time.time()


def _enter_stage(parts: LoopParts, state: LoopState, si: int, rows: int, now: float) -> None:
    """Close the previous stage's record, open this one's, and checkpoint the previous stage's end."""
    seq_len = parts.s.stages[si]
    if state.stages:
        state.stages[-1].update(end_step=state.step, end_s=round(now - parts.t0, 1))
    state.stages.append(
        {
            "stage": si,
            "seq_len": seq_len,
            "rows": rows,
            "start_step": state.step,
            "start_s": round(now - parts.t0, 1),
        }
    )
    log(f"stage {si}: {seq_len} tokens x {rows} rows")
    if state.stage >= 0:
        meta = {"step": state.step, "tokens": state.tokens, "stage": state.stage}
        save_checkpoint(parts.model, parts.fast_tok, parts.out, meta, parts.bundle)
        state.last_checkpoint = time.time()
    state.stage = si


def _step(parts: LoopParts, batch: dict[str, Any], lr: float) -> tuple[Any, Any, Any, Any]:
    """One optimizer step on the batch's weighted next-token loss: (loss, per-token CE, weights, ids)."""
    import torch
    import torch.nn.functional as F

    ids = torch.from_numpy(batch["ids"]).to(parts.device, non_blocking=True)
    w = torch.from_numpy(batch["w"]).to(parts.device, non_blocking=True)
    for group in parts.opt.param_groups:
        group["lr"] = lr
    with parts.autocast:
        logits = parts.model(input_ids=ids, use_cache=False).logits
    ce = F.cross_entropy(
        logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
    ).view(ids.shape[0], -1)
    wt = w[:, 1:]
    loss = (ce * wt).sum() / wt.sum().clamp_min(1e-6)
    parts.opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parts.model.parameters(), parts.s.grad_clip)
    parts.opt.step()
    return loss, ce, wt, ids


def _record(
    parts: LoopParts,
    state: LoopState,
    curve: Any,
    curve_f: Any,
    where: tuple[int, int, float],
    loss: Any,
    ce: Any,
    wt: Any,
) -> None:
    """A loss-curve row (weighted and answer-only loss) and, every few seconds, a log line;
    a non-finite loss ends the loop."""
    import torch

    si, length, lr = where
    with torch.no_grad():
        ans = wt == ANSWER_WEIGHT
        la = float((ce * ans).sum() / ans.sum().clamp_min(1))
    lv = float(loss.detach())
    if not math.isfinite(lv):
        raise FloatingPointError(f"loss is {lv} at step {state.step}")
    state.ema_loss = lv if state.ema_loss is None else 0.9 * state.ema_loss + 0.1 * lv
    state.ema_answer = la if state.ema_answer is None else 0.9 * state.ema_answer + 0.1 * la
    wait = parts.stream.wait_s
    seconds = round(time.time() - parts.t0, 2)
    curve.writerow(
        [state.step, seconds, si, length, f"{lr:.3e}", f"{lv:.5f}", f"{la:.5f}", state.tokens, round(wait, 2)]
    )
    if time.time() - state.last_print > (2 if parts.s.tiny else 10):
        curve_f.flush()
        el = time.time() - parts.train_start
        log(
            f"step {state.step:6d} stage {si} L={length:5d} lr {lr:.2e} loss {state.ema_loss:.4f} "
            f"answer-loss {state.ema_answer:.4f} | {state.tokens / el / 1e3:.0f}k tok/s, data wait "
            f"{wait / el:.0%}"
        )
        state.last_print = time.time()
