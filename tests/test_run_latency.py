"""Latency percentiles of a run (`evalkit.runner.latency`), against the standard library's."""

from __future__ import annotations

import random
import statistics

import pytest

from evalkit.runner.latency import LatencyLog, percentiles


def test_percentiles_match_the_standard_library():
    rng = random.Random(3)
    xs = [rng.lognormvariate(0, 1) for _ in range(257)]
    q = statistics.quantiles(xs, n=100, method="inclusive")  # q[k-1] is the k-th percentile
    p = percentiles(xs)
    assert p.n == 257 and (p.p50, p.p90, p.p99) == pytest.approx((q[49], q[89], q[98]), rel=1e-12)
    assert percentiles([]) is None and percentiles([float("nan")]) is None


def test_the_log_reads_the_engine_and_the_remote_timings():
    log = LatencyLog()
    log.add({"total_s": 2.0, "first_token_s": 0.5})  # the local engine
    log.add({"latency_s": 4.0, "attempts": 1.0})  # a server: no first token measured
    log.add(None)
    s = log.summary()
    assert s["e2e_s"]["n"] == 2 and s["e2e_s"]["p50"] == 3.0 and s["ttft_s"]["n"] == 1
    assert log.line().startswith("latency p50/p90/p99: e2e 3/") and "TTFT 0.5/0.5/0.5 s" in log.line()
    assert LatencyLog().line() == "" and LatencyLog().summary() == {}
