"""Teacher-forced drift: every arm reads the same tokens in lockstep with an fp32 arm.

The sequence is cut into blocks. For each block the fp32 session runs first, then each arm
session on the same tokens; metrics are computed against the fp32 logits and the logits are
dropped before the next block, so memory stays at a few blocks of logits however long L is.
- mode "prefill": a block is one prefill call of `chunk_size` tokens: the state is rounded once
  per block, as in an engine's chunked prefill.
- mode "decode": each block is fed token by token: the state is rounded after every token.
  Blocks are cut at the state checkpoints so states are compared at exact positions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from evalkit.backends.probe import ArmSession, DriftModel
from evalkit.drift.accumulate import BucketStats
from evalkit.drift.modes import MODES
from evalkit.drift.positions import checkpoints
from evalkit.drift.state_metrics import compare_states
from evalkit.drift.token_metrics import token_metrics

# Per-position metrics kept in buckets: KL, disagreement of the argmax (1 - top-1 agreement),
# and |Δ NLL| of the actual next token. All >= 0 so they can be read on log axes.
TOKEN_METRICS = ("kl", "top1_disagree", "abs_dnll")


@dataclass
class ArmTrace:
    """Everything measured for one arm in one mode."""

    arm: str
    mode: str
    buckets: dict[str, BucketStats]
    states: list[dict] = field(default_factory=list)  # one row per (checkpoint, layer)
    sum_dnll: float = 0.0  # Σ (nll_arm - nll_fp32): gives ln(PPL_arm / PPL_fp32)
    sum_nll_ref: float = 0.0
    n_nll: int = 0
    nonfinite_logits: int = 0
    seconds: float = 0.0


@dataclass
class TeacherForcedResult:
    mode: str
    length: int
    chunk_size: int | None
    traces: dict[str, ArmTrace]
    seconds_fp32: float = 0.0
    wall_seconds: float = 0.0
    block_count: int = 0
    requested_length: int = 0  # > length when a deadline stopped the run early


def _blocks(length: int, mode: str, chunk_size: int, decode_block: int, cps: list[int]) -> list[int]:
    """End positions of the blocks (exclusive token index == position of the block's last token)."""
    step = chunk_size if mode == "prefill" else decode_block
    ends = set(range(step, length, step)) | {length}
    if mode == "decode":
        ends |= {c for c in cps if 0 < c <= length}
    return sorted(ends)


def state_checkpoints(length: int, mode: str, chunk_size: int, per_octave: int = 1) -> list[int]:
    """Where states are compared: log-spaced, snapped to prefill chunk ends in prefill mode."""
    if mode == "prefill":
        ends = np.array(sorted(set(range(chunk_size, length, chunk_size)) | {length}))
        return checkpoints(length, per_octave, boundaries=ends)
    return checkpoints(length, per_octave)


def run_teacher_forced(
    model: DriftModel,
    tokens: torch.Tensor,
    arms: list[str],
    mode: str,
    *,
    chunk_size: int = 1024,
    decode_block: int = 256,
    per_octave: int = 2,
    state_per_octave: int = 1,
    max_bytes: int = 256 << 20,
    progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
    open_session: Callable[[str], ArmSession] | None = None,
) -> TeacherForcedResult:
    """Run the fp32 arm and every arm in `arms` over `tokens` [L] in `mode`; return the traces.

    `deadline` (a `time.perf_counter()` value) stops after the first block that ends past it;
    the result then covers the positions done (`length` < `requested_length`), and the state is
    compared once more at the position where it stopped. `open_session` maps an arm label to
    its session (default `model.open_session`): how the A/A arm computes fp32 another way."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tokens = tokens.to(torch.long).reshape(-1)
    L = int(tokens.numel())
    cps = state_checkpoints(L, mode, chunk_size, state_per_octave)
    cp_set = set(cps)
    ends = _blocks(L, mode, chunk_size, decode_block, cps)
    traces = {
        a: ArmTrace(a, mode, {m: BucketStats.for_length(L, per_octave) for m in TOKEN_METRICS}) for a in arms
    }
    t_wall = time.perf_counter()
    opener = open_session or model.open_session
    ref = model.open_session("fp32")
    sessions = {a: opener(a) for a in arms}
    seconds_fp32 = 0.0
    done = 0
    try:
        start = 0
        dev_tokens = tokens.to(model.device)
        for end in ends:
            late = deadline is not None and time.perf_counter() > deadline
            if late and start > 0:
                break
            block = dev_tokens[start:end]
            nxt = torch.full((end - start,), -1, dtype=torch.long, device=model.device)
            avail = min(end, L - 1) - start
            if avail > 0:
                nxt[:avail] = dev_tokens[start + 1 : start + 1 + avail]
            positions = np.arange(start + 1, end + 1)
            t0 = time.perf_counter()
            ref_logits = _feed(ref, mode, block)
            _sync(model.device)
            seconds_fp32 += time.perf_counter() - t0
            ref_states = ref.states() if (end in cp_set or end == L) else None
            for a in arms:
                t0 = time.perf_counter()
                arm_logits = _feed(sessions[a], mode, block)
                _sync(model.device)
                tr = traces[a]
                tr.seconds += time.perf_counter() - t0
                _fold(tr, positions, token_metrics(ref_logits, arm_logits, nxt, max_bytes=max_bytes))
                del arm_logits
            if ref_states is not None:
                _compare(traces, ref_states, sessions, end)
            del ref_logits, ref_states
            if progress is not None:
                progress(end - start, L)
            start = done = end
        if 0 < done < L and done not in cp_set:  # stopped early: the state where it stopped
            _compare(traces, ref.states(), sessions, done)
    finally:
        ref.close()
        for s in sessions.values():
            s.close()
    n_blocks = sum(1 for e in ends if e <= done)
    return TeacherForcedResult(
        mode,
        done,
        chunk_size if mode == "prefill" else None,
        traces,
        seconds_fp32,
        time.perf_counter() - t_wall,
        n_blocks,
        L,
    )


def _compare(
    traces: dict[str, ArmTrace], ref_states: list[torch.Tensor], sessions: dict, position: int
) -> None:
    for a, tr in traces.items():
        for row in compare_states(ref_states, sessions[a].states()):
            tr.states.append({"position": position, **row})


def _feed(session, mode: str, block: torch.Tensor) -> torch.Tensor:
    return session.prefill(block) if mode == "prefill" else session.decode(block)


def _sync(device: torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _fold(tr: ArmTrace, positions: np.ndarray, tm) -> None:
    m = tm.to_numpy()
    tr.buckets["kl"].add(positions, m["kl"])
    tr.buckets["top1_disagree"].add(positions, 1.0 - m["top1"])
    d = m["nll_arm"] - m["nll_ref"]
    has = np.isfinite(m["nll_ref"])  # a next token exists (a broken arm's NaN counts as non-finite)
    tr.buckets["abs_dnll"].add(positions[has], np.abs(d[has]))
    fin = has & np.isfinite(d)
    tr.sum_dnll += float(d[fin].sum())
    tr.sum_nll_ref += float(m["nll_ref"][fin].sum())
    tr.n_nll += int(fin.sum())
    tr.nonfinite_logits += int(m["nonfinite"].sum())
