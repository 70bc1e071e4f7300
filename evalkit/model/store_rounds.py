"""Several store chunks of a sequence in one forward, with the recurrent state stored between them.

A prefill forward may fold more than one of the arm's store chunks of a sequence (up to the token
budget): the dense layers (GEMMs of the forward's fixed padded shape) and the short convolutions see
the whole piece at once, while the recurrent core (KDA, Gated DeltaNet, SSD) runs once per *round*,
round r taking the r-th store chunk of every sequence from the state round r-1 stored, and the
attention layers attend one store chunk of each sequence at a time over the context up to that
chunk's end (`new_row_cuts`; the context gathered, and MLA's expanded, once per forward). Each call
is the one a forward of that one chunk would make (same rows, same initial state read from the
pool, same store position, same context), so the stored states are rounded at the arm's store
points and every number is the one-forward-per-chunk schedule's (the dense layers' rows being
independent of their batch mates: the batch-invariant engine's premise); only the forward count
changes (a 128k prompt at 2,048-token store points: 8 forwards of a 16,384-token budget instead of
64 forwards padded to it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .batch import ForwardBatch, StoreRound


def segments(start: int, n: int, chunk: int) -> list[tuple[int, int]]:
    """[a, b) positions of `n` tokens from `start`, cut at the multiples of `chunk`."""
    out, a, end = [], start, start + n
    while a < end:
        b = min(end, (a // chunk + 1) * chunk)
        out.append((a, b))
        a = b
    return out


def new_row_cuts(L: int, m: int, chunk: int) -> list[tuple[int, int, int]]:
    """A sequence's m new rows (the last of its L) cut where the rounds cut them, at the multiples of
    the store chunk (one piece when chunk is 0): per piece, its rows [i, j) among the m new ones and
    the context end b it attends up to, the call a forward per store chunk makes."""
    cuts = segments(L - m, m, chunk) if chunk else [(L - m, L)]
    return [(a - (L - m), b - (L - m), b) for a, b in cuts]


def store_rounds(
    starts: Sequence[int],
    lens: Sequence[int],
    slots: Sequence[int],
    chunk: int,
    device,
) -> list[StoreRound]:
    """The recurrent core's rounds of a prefill forward whose sequence i folds `lens[i]` tokens from
    position `starts[i]` into slot `slots[i]`; empty when every sequence folds at most one store
    chunk (the forward's own batch is then the one round)."""
    per_seq = [segments(s, n, chunk) for s, n in zip(starts, lens)]
    depth = max((len(p) for p in per_seq), default=0)
    if depth <= 1:
        return []
    row0 = [0]
    for n in lens:
        row0.append(row0[-1] + n)
    rounds = []
    for r in range(depth):
        ranges, cu, sl, init, pos = [], [0], [], [], []
        for i, segs in enumerate(per_seq):
            if r >= len(segs):
                continue
            a, b = segs[r]
            off = row0[i] + a - starts[i]
            ranges.append((off, off + b - a))
            cu.append(cu[-1] + b - a)
            sl.append(slots[i])
            init.append(a > 0)
            pos.append(b - 1)
        cu_cpu = torch.tensor(cu, dtype=torch.int32)
        batch = ForwardBatch(
            is_decode=False,
            input_ids=torch.empty(0, dtype=torch.long),
            num_tokens=cu[-1],
            slots=torch.tensor(sl, dtype=torch.long, device=device),
            cu_seqlens=cu_cpu.to(device),
            cu_seqlens_cpu=cu_cpu,
            has_initial_state=torch.tensor(init, dtype=torch.bool, device=device),
            state_positions=torch.tensor(pos, dtype=torch.long, device=device),
        )
        rounds.append(StoreRound(tuple(ranges), batch))
    return rounds


def _take(t: torch.Tensor, ranges: tuple[tuple[int, int], ...]) -> torch.Tensor:
    if len(ranges) == 1:
        a, b = ranges[0]
        return t[a:b]
    return torch.cat([t[a:b] for a, b in ranges])


def by_round(
    batch: ForwardBatch,
    rows: Sequence[torch.Tensor],
    call: Callable[[ForwardBatch, list[torch.Tensor]], torch.Tensor],
) -> torch.Tensor:
    """`call(batch, rows)` for the forward's prefill batch, or once per store round on that round's
    rows (each tensor of `rows` has one row per packed token), the outputs put back in row order."""
    if not batch.store_rounds:
        return call(batch, list(rows))
    out = None
    for rnd in batch.store_rounds:
        o = call(rnd.batch, [_take(t, rnd.ranges) for t in rows])
        if out is None:
            out = o.new_empty((batch.num_tokens, *o.shape[1:]))
        at = 0
        for a, b in rnd.ranges:
            out[a:b] = o[at : at + b - a]
            at += b - a
    return out
