"""Training batches, built in forked worker processes (numpy only): rows sized to the curriculum
stage without a search, loss weights on the answer tokens."""

from __future__ import annotations

import os
import random
import time
from collections import deque
from typing import Any

from evalkit.refmodel.arithmetic import arithmetic_problem
from evalkit.refmodel.mixture import DECODE_ITEMS, build_example, chat_prompt, gens
from evalkit.refmodel.settings import ANSWER_WEIGHT, CONTEXT_WEIGHT, Settings
from evalkit.refmodel.tokenizer import EOS, IM_END

WORKER: dict[str, Any] = {}  # worker globals, inherited through fork


def calibrate(s: Settings, tok: Any, sentences: list[str]) -> dict[str, tuple[float, float]]:
    """tokens ~= a + b * units per family, from two sizes, so rows are sized without a search."""
    g = gens()
    out = {}
    for fam in s.mixture:
        if fam == "arithmetic":
            continue
        pts = []
        for n in (4, 40):
            vals = []
            for j in range(6):
                rng = g.training_rng(s.seed + 2 * 10**9 + 100 * j + n)
                vals.append(len(tok.encode(build_example(fam, rng, n, sentences).prompt).ids))
            pts.append(sum(vals) / len(vals))
        b = max((pts[1] - pts[0]) / 36, 0.5)
        out[fam] = (max(pts[0] - 4 * b, 1.0), b)
    return out


def encode_row(text: str, answer_start: int, L: int, bos: bool) -> tuple[list[int], list[float]] | None:
    """Token ids of `text` (with a BOS) and per-token loss weights: answer tokens (from char
    `answer_start` on) 1, context 0.02. None if it does not fit L tokens."""
    tok = WORKER["tok"]
    enc = tok.encode(text, add_special_tokens=False)
    ids = ([WORKER["bos_id"]] if bos else []) + enc.ids
    if len(ids) > L:
        return None
    w = [CONTEXT_WEIGHT] * (1 if bos else 0) + [
        ANSWER_WEIGHT if start >= answer_start else CONTEXT_WEIGHT for start, _ in enc.offsets
    ]
    return ids, w


def task_row(fam: str, rng: random.Random, L: int) -> tuple[list[int], list[float], int] | None:
    """One task example sized to fit L tokens: prompt (context weight), then ` answer` and the end
    token (answer weight). Plain text gets a BOS most of the time; chat rows carry the template's.
    None when even the smallest haystack does not fit (e.g. vt's solved example in a short row)."""
    s: Settings = WORKER["settings"]
    a, b = WORKER["calib"][fam]
    chat = rng.random() < s.chat_probability
    bos = rng.random() < s.bos_probability
    budget = rng.uniform(s.min_doc_fraction, 1.0) * L - 24  # room for the answer
    if fam in DECODE_ITEMS:  # the items and the long answer come out of the same budget
        state = rng.getstate()
        ex = build_example(fam, rng, 0, WORKER["sentences"], row_tokens=L)
        rng.setstate(state)
        a = len(WORKER["tok"].encode(ex.prompt + " " + ex.answer).ids) + 8
    units = max(int((budget - a) / b), 0)
    state = rng.getstate()
    for _ in range(6):
        rng.setstate(state)  # same needles, fewer haystack units on a retry
        ex = build_example(fam, rng, units, WORKER["sentences"], row_tokens=L)
        prompt = chat_prompt(ex) if chat else ex.prompt
        text = prompt + " " + ex.answer + (IM_END if chat else EOS)
        row = encode_row(text, len(prompt), L, bos and not chat)
        if row is not None:
            return row[0], row[1], units
        if units == 0:
            return None
        units = max(int(units * 0.7) - 1, 0)
    return None


def arithmetic_row(rng: random.Random, L: int) -> tuple[list[int], list[float], int]:
    """Several problems back to back, lm-eval few-shot style (`\\n\\n` between them)."""
    parts: list[tuple[str, bool]] = []
    n = 0
    approx = 0
    while approx < L:
        q, a = arithmetic_problem(rng).text()
        parts += [(q, False), (a + "\n\n", True)]
        approx += (len(q) + len(a)) // 3  # over-estimate of tokens (about 3.5 chars per token)
        n += 1
    text = "".join(p for p, _ in parts)
    marks, pos = [], 0
    for p, is_answer in parts:
        marks.append((pos, pos + len(p), is_answer))
        pos += len(p)
    tok = WORKER["tok"]
    enc = tok.encode(text, add_special_tokens=False)
    ids, w = [WORKER["bos_id"]], [CONTEXT_WEIGHT]
    j = 0
    for tid, (start, _) in zip(enc.ids, enc.offsets):
        while j < len(marks) - 1 and start >= marks[j][1]:
            j += 1
        ids.append(tid)
        w.append(ANSWER_WEIGHT if marks[j][2] else CONTEXT_WEIGHT)
    return ids[:L], w[:L], n


def make_batch(spec: tuple[int, int, int]) -> dict[str, Any]:
    """One training batch: `rows` rows of exactly `L` tokens (right-padded, pads weight 0).
    Row r of batch k draws everything from training_rng(seed + k * 4096 + r)."""
    import numpy as np

    L, rows, k = spec
    s: Settings = WORKER["settings"]
    g = gens()
    fams = list(s.mixture)
    weights = [s.mixture[f] for f in fams]
    ids = np.full((rows, L), WORKER["pad_id"], dtype=np.int64)
    wts = np.zeros((rows, L), dtype=np.float32)
    counts: dict[str, int] = {}
    for r in range(rows):
        rng = g.training_rng(s.seed + k * 4096 + r)
        row = None
        for _ in range(4):  # a family too big for a short row gives its place to another draw
            fam = rng.choices(fams, weights)[0]
            row = arithmetic_row(rng, L) if fam == "arithmetic" else task_row(fam, rng, L)
            if row is not None:
                break
        if row is None:
            fam = "arithmetic"
            row = arithmetic_row(rng, L)
        row_ids, row_w, _ = row
        ids[r, : len(row_ids)] = row_ids
        wts[r, : len(row_w)] = row_w
        counts[fam] = counts.get(fam, 0) + 1
    return {"ids": ids, "w": wts, "L": L, "k": k, "counts": counts}


def _worker_init() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class BatchStream:
    """Batches from a process pool, submitted with the curriculum stage current at submission
    time; a window of outstanding batches keeps the GPU fed without unbounded queueing."""

    def __init__(self, workers: int, window: int) -> None:
        import multiprocessing as mp

        self.pool = mp.get_context("fork").Pool(workers, initializer=_worker_init) if workers > 0 else None
        self.window = window
        self.pending: deque = deque()
        self.next_k = 0
        self.wait_s = 0.0

    def get(self, L: int, rows: int) -> dict[str, Any]:
        if self.pool is None:
            k = self.next_k
            self.next_k += 1
            t = time.time()
            out = make_batch((L, rows, k))
            self.wait_s += time.time() - t
            return out
        while len(self.pending) < self.window:
            self.pending.append(self.pool.apply_async(make_batch, ((L, rows, self.next_k),)))
            self.next_k += 1
        t = time.time()
        out = self.pending.popleft().get(timeout=300)
        self.wait_s += time.time() - t
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
