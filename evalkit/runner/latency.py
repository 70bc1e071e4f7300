"""Request latency percentiles of a run, beside its tokens/s: end to end (every backend) and
time to first token (where the backend measured it: the local engine does; a non-streaming
server request does not)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Percentiles:
    n: int
    p50: float
    p90: float
    p99: float

    def text(self) -> str:
        return f"{self.p50:.3g}/{self.p90:.3g}/{self.p99:.3g} s"


def percentiles(values: Iterable[float]) -> Percentiles | None:
    """p50/p90/p99 (linear interpolation between order statistics); None without values."""
    xs = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if xs.size == 0:
        return None
    p50, p90, p99 = (float(v) for v in np.percentile(xs, PERCENTILES))
    return Percentiles(int(xs.size), p50, p90, p99)


class LatencyLog:
    """Collects each request's timings as results arrive."""

    def __init__(self) -> None:
        self.e2e: list[float] = []
        self.ttft: list[float] = []

    def add(self, timings: dict[str, float] | None) -> None:
        t = timings or {}
        e2e = t.get("latency_s", t.get("total_s"))  # the remote backend's, the engine's
        if e2e is not None:
            self.e2e.append(float(e2e))
        if t.get("first_token_s") is not None:
            self.ttft.append(float(t["first_token_s"]))

    def summary(self) -> dict[str, Any]:
        """{"e2e_s": {...}, "ttft_s": {...}} for the kinds measured (JSON-ready)."""
        out = {}
        for name, values in (("e2e_s", self.e2e), ("ttft_s", self.ttft)):
            p = percentiles(values)
            if p is not None:
                out[name] = asdict(p)
        return out

    def line(self) -> str:
        """ "latency p50/p90/p99: e2e ..., TTFT ..." (empty when nothing was measured)."""
        parts = []
        for label, values in (("e2e", self.e2e), ("TTFT", self.ttft)):
            p = percentiles(values)
            if p is not None:
                parts.append(f"{label} {p.text()}")
        return f"latency p50/p90/p99: {', '.join(parts)}" if parts else ""
