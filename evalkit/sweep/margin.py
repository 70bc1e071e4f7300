"""Bits of margin: the fewest mantissa bits whose arm is still non-inferior to fp32, per length.

The precision ladder is the arms that differ from the baseline only in how many mantissa bits a
store keeps, rounding to nearest (fp16, bf16 and `mN` arms at the baseline's chunk size and
intra-chunk dtype; stochastic rounding, truncation and fp8 are controls, not rungs). Walking down
from the most bits, the answer at a length is the last rung before the first one that is not
non-inferior at delta, the length's tasks pooled (so a lucky pass below a failure does not count). It is set
against fp16's 10 and bf16's 7 explicit bits: "fp16 has 10 - N bits to spare". A length where the
baseline gets every pooled question wrong has no room for a loss, and shows no bits at all.
"""

from __future__ import annotations

from typing import Any

from evalkit.arm import REFERENCE_BITS, Arm


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
    verdicts: dict[tuple, dict[str, Any]], arms: dict[str, Arm], baseline: str
) -> dict[str, Any]:
    """{length: {fewest_bits, arm, ladder: [[bits, arm, non-inferior]...], fp16_spare, bf16_spare}}
    from `cells.length_verdicts` ((arm, length) -> {noninferior, ...}); length "all" for tasks
    without lengths."""
    rungs = sorted((a.mantissa_bits, label) for label, a in arms.items() if on_the_ladder(a, arms[baseline]))[
        ::-1
    ]
    lengths = sorted({length for _, length in verdicts}, key=lambda x: (x is None, x or 0))
    out: dict[str, Any] = {}
    for length in lengths:
        ladder, fewest, fewest_arm, broken = [], None, None, False
        # where the baseline gets every question wrong, no arm can lose one: nothing is shown
        no_room = any(v.get("baseline_right") == 0 for (_, n), v in verdicts.items() if n == length)
        for bits, label in rungs:
            v = verdicts.get((label, length))
            ok = bool(v and v["noninferior"]) and not no_room
            ladder.append([bits, label, ok])
            if not ok:
                broken = True
            elif not broken:
                fewest, fewest_arm = bits, label
        key = "all" if length is None else str(length)
        out[key] = {
            "fewest_bits": fewest,
            "arm": fewest_arm,
            "ladder": ladder,
            "no_room": no_room,
            **{f"{name}_spare": None if fewest is None else b - fewest for name, b in REFERENCE_BITS.items()},
        }
    return out
