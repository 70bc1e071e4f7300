"""Kernel timings the benchmark scripts share: `do_bench` medians, and the time of one replay of a
CUDA graph (how the engine runs its decode steps: no launch overhead between kernels)."""

from __future__ import annotations

import time
from collections.abc import Callable


def bench_ms(fn: Callable[[], object], warmup: int = 25, rep: int = 100, smoke: bool = False) -> float:
    """Median ms of fn() by `triton.testing.do_bench`; `smoke`: one wall-clock call (the CPU
    interpreter's runs, which check a script's plumbing and mean nothing as times)."""
    if smoke:
        t = time.perf_counter()
        fn()
        return 1e3 * (time.perf_counter() - t)
    import triton

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def graph_ms(fn: Callable[[], object], warmup: int = 10, rep: int = 100, smoke: bool = False) -> float:
    """Median ms of one replay of a CUDA graph that captured fn() once (after three warm-up calls
    on a side stream, as graph capture requires); `smoke`: `bench_ms` of fn itself."""
    if smoke:
        return bench_ms(fn, smoke=True)
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return bench_ms(graph.replay, warmup, rep)
