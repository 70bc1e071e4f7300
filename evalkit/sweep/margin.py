"""Bits of margin: the fewest mantissa bits whose arm is still non-inferior to fp32, per length.

The precision ladder is the arms that differ from the baseline only in how many mantissa bits a
store keeps, rounding to nearest (fp16, bf16 and `mN` arms at the baseline's chunk size and
intra-chunk dtype; stochastic rounding, truncation and fp8 are controls, not rungs). Walking down
from the most bits, the answer at a length is the last rung before the first one that is not
non-inferior at delta, the length's tasks pooled (so a lucky pass below a failure does not count). It is set
against fp16's 10 and bf16's 7 explicit bits: "fp16 has 10 - N bits to spare". A length where the
baseline gets every pooled question wrong has no room for a loss, and shows no bits at all; a sweep
with no arm on the ladder has no bits of margin.
"""

from __future__ import annotations

from typing import Any

from evalkit.arm import Arm


def on_the_ladder(arm: Arm, baseline: Arm) -> bool:
    f = arm.format
    return (
        f.rounding == "rtne"
        and f.storage in ("fp32", "fp16", "bf16")
        and not f.exact
        and arm.prefill_chunk_size == baseline.prefill_chunk_size
        and arm.intra_chunk_dtype == baseline.intra_chunk_dtype
    )


def bits_of_margin(
    verdicts: dict[tuple, dict[str, Any]], arms: dict[str, Arm], baseline: str, margin: float
) -> dict[str, Any]:
    """{length: {fewest_bits, arm, ladder: [[bits, arm, non-inferior]...], no_room, fp16_spare,
    bf16_spare}} from `cells.length_verdicts` ((arm, length) -> pooled {n, baseline_only,
    candidate_only, baseline_right}); length "all" for tasks without lengths. The walk is
    `evalkit.compare.bits`'s, on the ladder's arms."""
    from evalkit.compare.bits import bits_of_margin as walk

    ladder = {label: a for label, a in arms.items() if on_the_ladder(a, arms[baseline])}
    rows = {
        (a.mantissa_bits, label): [{"length": n, **v} for (arm, n), v in verdicts.items() if arm == label]
        for label, a in ladder.items()
    }
    rows = {k: v for k, v in rows.items() if v}
    out: dict[str, Any] = {}
    if not rows:  # no arm on the ladder (e.g. fp32 against store-point arms only): nothing to walk
        return out
    for length, b in walk(rows, margin=margin).items():
        out["all" if length is None else str(length)] = {
            "fewest_bits": b.bits,
            "arm": b.arm,
            "ladder": [[bits, label, ok] for bits, label, ok in zip(b.tested, b.arms, b.noninferior)],
            "no_room": b.no_room,
            "fewest_consistent_bits": b.fewest_consistent,
            "range_open_below": b.open_below,
            "fp16_spare": b.headroom_vs_fp16,
            "bf16_spare": b.headroom_vs_bf16,
        }
    return out
