"""Overflow headroom of a run: per length, the largest |state| per recurrent layer over its
samples, and how many doublings the arm's format has left above it.

"Bits of exponent headroom" = log2(format max / largest |state|): 0 or less means the state
reached the format's max (fp16 overflows to inf there, fp8_e4m3 saturates at 448). It sits beside
the bits of mantissa margin (`evalkit.sweep.margin`): one says how much precision the state can
lose, the other how much larger it may grow. Samples without `state_max_abs` (servers, runs
written before it was recorded) are not counted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any


def exponent_headroom_bits(format_max: float, largest: float | None) -> float | None:
    """log2(format_max / largest); None when nothing was seen (no state or an all-zero one) or
    the state was not finite (then there is no headroom to speak of: the sample is "overflow")."""
    if largest is None or not math.isfinite(largest) or largest <= 0:
        return None
    return math.log2(format_max / largest)


@dataclass(frozen=True)
class Headroom:
    """One length's (or "all"'s) state magnitudes."""

    n: int  # samples with a recorded state
    layer_max_abs: list[float | None]  # per recurrent layer: the largest over the samples
    max_abs: float | None  # the largest finite one over layers (None: none seen)
    headroom_bits: float | None  # exponent_headroom_bits(format max, max_abs); None if any non-finite
    overflow: int  # samples flagged "overflow"
    nonfinite: int  # samples with a non-finite state element


def _merge(seen: list[float | None], now: list[float | None]) -> list[float | None]:
    if not seen:
        return list(now)
    return [max((v for v in (a, b) if v is not None), default=None) for a, b in zip(seen, now)]


def summarise_headroom(samples: Iterable[dict[str, Any]], format_max: float) -> dict[str, Headroom]:
    """{length or "all": Headroom} over the samples that carry `state_max_abs`."""
    layers: dict[str, list[float | None]] = defaultdict(list)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for s in samples:
        per_layer = s.get("state_max_abs")
        if not isinstance(per_layer, list):
            continue
        length = s.get("length")
        for b in ["all"] if length is None else [str(length), "all"]:
            layers[b] = _merge(layers[b], per_layer)
            c = counts[b]
            c[0] += 1
            c[1] += "overflow" in (s.get("flags") or [])
            c[2] += bool(s.get("state_nonfinite"))
    out = {}
    for b in sorted(layers, key=lambda k: (k == "all", int(k) if k != "all" else 0)):
        top = max((v for v in layers[b] if v is not None), default=None)
        n, overflow, nonfinite = counts[b]
        bits = None if nonfinite else exponent_headroom_bits(format_max, top)  # inf/NaN: none left
        out[b] = Headroom(n, layers[b], top, bits, overflow, nonfinite)
    return out


def headroom_record(samples: Iterable[dict[str, Any]], format_max: float) -> dict[str, Any]:
    """`summarise_headroom` as JSON ({length: fields}), with the format's max."""
    return {
        "format_max": format_max,
        "lengths": {b: asdict(h) for b, h in summarise_headroom(samples, format_max).items()},
    }


def format_max_of(manifest: dict[str, Any]) -> float:
    """The largest finite state value of a run's arm (fp32's when the manifest names none)."""
    from evalkit.kernels.formats import FormatError, parse_format

    arm = manifest.get("arm")
    name = arm.get("format", {}).get("name") if isinstance(arm, dict) else None
    try:
        return parse_format(name or "fp32").max_finite
    except FormatError:
        return parse_format("fp32").max_finite


def headroom_line(record: dict[str, Any]) -> str:
    """One line for the end-of-run table: per length, the bits of exponent headroom, the largest
    |state| and the samples flagged overflow."""
    parts = []
    for length, c in record["lengths"].items():
        if c["nonfinite"]:
            bits = f"none ({c['nonfinite']} non-finite)"
        else:
            bits = "–" if c["headroom_bits"] is None else f"{c['headroom_bits']:.1f} bits"
        top = "–" if c["max_abs"] is None else f"{c['max_abs']:.3g}"
        parts.append(f"{length}: {bits}, max |state| {top}, {c['overflow']}/{c['n']} overflow")
    return f"exponent headroom (format max {record['format_max']:.4g}): " + "; ".join(parts)
