# ruff: noqa: E501
"""The KDA prefill variants against FLA's `chunk_kda` on one GPU (issue 15's prefill-kernel goals).

    python scripts/bench_prefill.py --out DIR [--parts check,sweep,lengths,varlen,kernels] [--budget-s 540]

Cases (B = 1, H = 32, K = V = 128, bf16 inputs, fp32 pool, an initial state): `split`
(the earlier variant, the numerics floor), `stream` (fp32 operands, tf32x3 products: evalkit's arithmetic), `stream_swept`
(the same with the sweep's fastest fp32 tiles where they differ from the wrapper's, e.g. tf32x3 operands split by bit arithmetic), `stream_bf16`
(the production form: bf16 operands as FLA-based servers run, `dot_precision="bf16"`) and `fla`
(`chunk_kda` with the l2 norm, gate and beta sigmoid in its kernels, fp32 initial/final state).

Parts, in this order (each a section of the report; a failure is recorded and the next runs):
  check    on the GPU, fp32 inputs, three packed sequences with partial chunks: every case's output
           and stored state against the float64 reference; stream with bf16 chunk-boundary states;
           on bf16 inputs, stream_bf16 against FLA
  sweep    tiles of the stream variant's launches at T = 32k per operand dtype (SWEEP), each part
           with the best of the parts before; each tile's output checked against the default
           tile's (a "split" tile is adopted only if every output and state bit is the default's); the fastest tiles are then used by the parts after it (`--no-adopt` keeps the
           wrapper's)
  lengths  T in {8k, 32k, 128k}: median of 3 interleaved do_bench medians per case; ratios vs FLA
  varlen   32,768 tokens as sequences of 500-1,300 tokens (an engine prefill batch); FLA with cu_seqlens
  scan_batches  (on request) the bf16 form with each of SCAN_BY_BATCH's scan tiles, on one
           sequence of 8k/32k/128k, 2-32 equal sequences of 32k tokens in all, the varlen batch and
           one 16k sequence among short ones, FLA beside them (what chose the bf16 scan tile)
  kernels  per-kernel CUDA time of one prefill at 32k, stream, stream_swept, stream_bf16 and FLA (torch profiler),
           stream_bf16 and FLA on the varlen batch, and each call's wall time beside its kernels' sum
Timings: `triton.testing.do_bench` medians; Python 3.12, torch 2.11+cu130, triton 3.6, fla-core 0.6.0.
`--smoke` runs the parts on the CPU interpreter at tiny shapes (the script's plumbing, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    from evalkit.bench import harness
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(ROOT))
    from evalkit.bench import harness

H, K, V = 32, 128, 128
LENGTHS = [8192, 32768, 131072]
SWEEP_T = 32768
VARLEN_T = 32768
REPEATS = 3
CASES = {
    "split": dict(variant="split"),
    "stream": dict(variant="stream"),
    # the fp32 form with the sweep's fastest tiles where they differ from the wrapper's (a "split"
    # set only if bit-identical): the sweep fills `tiles`; without a sweep it is `stream`
    "stream_swept": dict(variant="stream", tiles={}),
    "stream_bf16": dict(variant="stream", dot_precision="bf16"),
}
# split was measured before (results/bench/prefill-variants-h200, prefill-stream-h200/call2); the
# "fused" variant measured there is deleted (the product keeps stream, and split as a numerics floor)
TIMED = ["stream", "stream_swept", "stream_bf16"]
# Tiles swept at SWEEP_T, per operand dtype, each part with the best of the parts before it (the
# other parts' tiles: the wrapper's, from the sweeps of results/bench/prefill-stream-h200/call2).
_DIAG = {
    "order": [(True,), (False,)],
    "diag": [(2, 1), (4, 2), (1, 1), (2, 2), (4, 4), (8, 2), (8, 4)],
    "inverse": [(1,), (2,)],
}
SWEEP = {
    "fp32": {
        "prep": [(32, 4, "exact", "head"), (32, 4, "exact", "column"), (32, 4, "exact", "chunk")],
        **_DIAG,
        "offdiag": [(32, 1, 1, "pair"), (32, 2, 1, "pair"), (128, 2, 1, "chunk")],
        # one program per (chunk, column block, head) measured slower on an H100 and was removed
        # (prefill-split/h100-check/: 9.38-10.12 ms against 9.22)
        "wu": [(32, 4, 1), (32, 8, 1), (32, 4, 2), (16, 4, 1), (64, 8, 1)],  # fmt: skip
        # session 36: the three-stage scan compiles without spills (251 registers); the fused
        # output spills 424-1112 bytes (kernels/compile_check.py) but spares the 1 GB of chunk
        # states written and read back at 32k; output tiles of fewer registers (222-223)
        "scan": [(16, 4, 2, False), (16, 4, 3, False), (16, 4, 2, True), (16, 8, 2, True), (16, 4, 3, True)],
        "output": [(64, 4, 2), (64, 8, 2), (32, 4, 2), (64, 4, 3)],
        "output_order": [("chunk",), ("head",)],
        # adopted only when every output and state bit equals the default's (kernels/tf32x3.py)
        "split": [
            (),
            ("scan",),
            ("wu", "scan"),
            ("offdiag", "wu", "scan"),
            ("offdiag", "inverse", "wu", "scan"),
            ("offdiag", "inverse", "wu", "scan", "output"),
        ],
        # (scan tile, presplit): the wu launch writes Kd as its tf32x3 halves, chunk-transposed, which
        # the scan feeds to the tensor cores from shared memory, so its registers allow BV 32
        # (kernels/compile_check.py). Its last bits differ from the default's on the GPU
        # (results/bench/prefill-presplit/), so the bit comparison keeps it from being adopted
        "presplit": [
            ((16, 4, 2, False), (False,)),
            ((32, 4, 2, False), (True,)),
            ((32, 8, 2, False), (True,)),
            ((16, 4, 2, False), (True,)),
        ],
    },
    "bf16": {
        "prep": [
            (32, 2, "approx", "head"),
            (32, 2, "approx", "column"),
            (32, 2, "approx", "chunk"),
            (32, 4, "approx", "column"),
            (64, 4, "approx", "column"),
            (64, 8, "approx", "column"),
        ],
        **_DIAG,
        "offdiag": [(128, 2, 1, "chunk"), (32, 1, 1, "pair"), (64, 2, 1, "row")],
        "wu": [(64, 8, 1), (64, 4, 1), (32, 4, 1), (64, 8, 2), (128, 8, 1)],
    },
}
# scan tiles timed on the varlen batch (never adopted: the defaults are the single sequence's);
# call14 (results/bench/prefill-stream-h200/) ran them one per process (--varlen-scan): a tile
# that faults the GPU takes its process down
SWEEP_VARLEN = {
    "fp32": {"scan": [(16, 4, 2, False), (16, 4, 1, False)]},
    "bf16": {"scan": [(64, 4, 3, True), (64, 4, 2, True), (64, 8, 3, True), (32, 4, 3, True)]},
}
DEV = "cuda"
SMOKE = False
log = harness.Log(harness.Clock())


def smoke_mode() -> None:
    global H, K, V, LENGTHS, SWEEP_T, VARLEN_T, DEV, SMOKE, REPEATS
    H, K, V, LENGTHS, SWEEP_T, VARLEN_T, DEV, SMOKE, REPEATS = 2, 32, 32, [70, 130], 130, 200, "cpu", True, 1
    os.environ["TRITON_INTERPRET"] = "1"
    for kind in (*SWEEP.values(), *SWEEP_VARLEN.values()):
        for part in kind:
            kind[part] = kind[part][:1]


def bench_ms(fn, warmup=10, rep=50) -> float:
    import triton

    if SMOKE:
        t = time.perf_counter()
        fn()
        return 1e3 * (time.perf_counter() - t)
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def rel_err(a, b) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def environment() -> dict:
    import platform

    import torch
    import triton

    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "git": harness.git_state(), "H": H, "K": K, "V": V}  # fmt: skip
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    try:
        import fla

        env["fla"] = getattr(fla, "__version__", "?")
    except ImportError:
        env["fla"] = None
    return env


class Problem:
    """Inputs of one benchmark shape: packed rows, sequence lengths, a pool with initial states."""

    def __init__(self, lengths: list[int], dtype_name: str = "bf16", heads: int | None = None):
        import torch

        from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool

        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
        self.lengths = lengths
        self.T = sum(lengths)
        h = heads or H
        self.x = kda_inputs(self.T, h, K, V, dtype=dtype, device=DEV)
        self.cu = random_cu_seqlens(lengths, device=DEV)
        N = len(lengths)
        self.pool0 = random_pool(N, h, K, V, torch.float32, device=DEV)
        self.slots = torch.arange(N, dtype=torch.int32, device=DEV)
        self.init = torch.ones(N, dtype=torch.bool, device=DEV)

    def ours(self, **kw):
        """Our prefill on these rows, given cu_seqlens on the host as the engine does (no sync)."""
        from evalkit.kernels.kda_prefill import wrapper as pw

        pool = self.pool0.clone()
        args = (*self.x.args(), pool, self.slots, self.cu.cpu(), self.init)
        kw = dict(kw)
        overrides = kw.pop("tiles", {})

        def run():
            saved = pw.STREAM_TILES["fp32"]
            pw.STREAM_TILES["fp32"] = {**saved, **overrides}
            try:
                return pw.kda_prefill(*args, **kw)
            finally:
                pw.STREAM_TILES["fp32"] = saved

        run.pool = pool  # the stored states, for bit comparisons
        return run

    def fla(self):
        """FLA's chunk_kda on the same rows (one batch row, cu_seqlens when several sequences)."""
        from fla.ops.kda import chunk_kda

        x = self.x
        q, k, v, g, beta = (t[None] for t in (x.q, x.k, x.v, x.g_raw, x.beta_raw))
        h0 = self.pool0.clone()
        cu = self.cu.long() if len(self.lengths) > 1 else None
        return lambda: chunk_kda(
            q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
            A_log=x.A_log, dt_bias=x.dt_bias,
        )  # fmt: skip

    def cases(self) -> dict:
        out = {name: self.ours(**CASES[name]) for name in TIMED}
        if not SMOKE:
            out["fla"] = self.fla()
        return out


def timed_rows(p: Problem, repeats: int = REPEATS) -> dict:
    """Median of `repeats` interleaved do_bench medians per case (a clock drift hits every case alike)."""
    import torch

    row: dict = {"T": p.T, "sequences": len(p.lengths)}
    cases = p.cases()
    rep = 100 if p.T <= 32768 else 40
    for _ in range(repeats):
        for label, fn in list(cases.items()):
            try:
                with torch.inference_mode():
                    row.setdefault(f"{label}_runs_ms", []).append(bench_ms(fn, warmup=10, rep=rep))
            except Exception as exc:  # noqa: BLE001 - record and go on with the other cases
                row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                del cases[label]
    for label in [*TIMED, "fla"]:
        runs = row.get(f"{label}_runs_ms")
        if runs and f"{label}_error" not in row:
            row[f"{label}_ms"] = statistics.median(runs)
            row[f"{label}_Mtok_s"] = p.T / row[f"{label}_ms"] / 1e3
    for label in TIMED:  # ratios once FLA's median is known
        if f"{label}_ms" in row and "fla_ms" in row:
            row[f"{label}_vs_fla"] = row["fla_ms"] / row[f"{label}_ms"]
    return row


# ------------------------------------------------------------------------------------ parts
def part_check() -> dict:
    import torch

    from evalkit.kernels import reference
    from evalkit.kernels.kda_prefill import wrapper as pw

    out: dict = {}
    lengths = [200, 1, 77] if not SMOKE else [70, 1, 20]
    p = Problem(lengths, "fp32", heads=4)  # the float64 reference runs token by token on the CPU
    cpu = lambda t: t.cpu()  # noqa: E731
    x = p.x
    args_cpu = [cpu(t) for t in x.args()]
    for label, kw in [
        *CASES.items(),
        ("stream_intra_bf16", dict(variant="stream", intra_chunk_dtype=torch.bfloat16)),
    ]:
        pool_ref = cpu(p.pool0).double()
        intra = kw.get("intra_chunk_dtype")
        o_ref = reference.kda_prefill(
            *args_cpu, pool_ref, cpu(p.slots), cpu(p.cu), cpu(p.init), intra_chunk_dtype=intra
        )
        pool = p.pool0.clone()
        o = pw.kda_prefill(
            *x.args(), pool, p.slots, p.cu, p.init, out=torch.full_like(x.v, float("nan")), **kw
        )
        out[label] = {"out_rel_err": rel_err(o, o_ref), "pool_rel_err": rel_err(pool, pool_ref),
                      "finite": bool(torch.isfinite(o).all())}  # fmt: skip
        pool_h = p.pool0.clone()  # cu_seqlens on the host (as the engine and the timings pass it)
        o_h = pw.kda_prefill(*x.args(), pool_h, p.slots, cpu(p.cu), p.init, **kw)
        out[label]["host_cu_bit_equal"] = bool(torch.equal(o_h, o) and torch.equal(pool_h, pool))
    if not SMOKE:  # the production form next to FLA on bf16 inputs
        pb = Problem([4096, 1000], "bf16")
        with torch.inference_mode():
            o_fla, s_fla = pb.fla()()
            pool = pb.pool0.clone()
            o_b = pw.kda_prefill(
                *pb.x.args(), pool, pb.slots, pb.cu, pb.init, variant="stream", dot_precision="bf16"
            )
            pool32 = pb.pool0.clone()
            o_32 = pw.kda_prefill(*pb.x.args(), pool32, pb.slots, pb.cu, pb.init, variant="stream")
        out["bf16_inputs"] = {
            "stream_bf16_vs_fla_out": rel_err(o_b, o_fla[0]), "stream_bf16_vs_fla_state": rel_err(pool, s_fla),
            "stream_fp32_vs_fla_out": rel_err(o_32, o_fla[0]), "stream_bf16_vs_stream_fp32_out": rel_err(o_b, o_32),
        }  # fmt: skip
    log("check", json.dumps(out))
    return out


def part_sweep(
    adopt: bool,
    only: list[str] | None = None,
    varlen: bool = False,
    kinds: tuple[str, ...] = ("fp32", "bf16"),
) -> dict:
    """Each tile of SWEEP (or, varlen, of SWEEP_VARLEN on the varlen batch) timed in turn."""
    import torch

    from evalkit.kernels.kda_prefill import wrapper as pw
    from evalkit.kernels.twin_check import bit_equal

    p = Problem(varlen_lengths() if varlen else [SWEEP_T])
    res: dict = {"T": SWEEP_T, "adopted": adopt, "varlen": varlen}
    chk = p if not SMOKE else Problem([130])  # each tile's output against the default's
    sweep = SWEEP_VARLEN if varlen else SWEEP
    for kind, prec in (("fp32", None), ("bf16", "bf16")):
        if kind not in kinds:
            continue
        kw = dict(variant="stream", dot_precision=prec)
        with torch.inference_mode():
            run_default = chk.ours(**kw)
            o_default = run_default().float()
            s_default = run_default.pool.clone()
        best = dict(pw.STREAM_TILES[kind])
        for part in sweep[kind]:
            if only and part not in only:
                continue
            if part == "output" and best["scan"][3]:
                continue  # the output kernel runs only without a fused output
            entries = []
            for tile in sweep[kind][part]:
                trial = (
                    {**best, "scan": tile[0], "presplit": tile[1]}
                    if part == "presplit"
                    else {**best, part: tile}
                )
                saved = pw.STREAM_TILES[kind]
                pw.STREAM_TILES[kind] = trial
                e: dict = {"tile": [list(t) if isinstance(t, tuple) else t for t in tile]}
                try:
                    with torch.inference_mode():
                        run = chk.ours(**kw)
                        o = run().float()
                        e["out_rel_diff_vs_default"] = rel_err(o, o_default)
                        e["bits_equal_default"] = bit_equal(o, o_default) and bit_equal(run.pool, s_default)
                        o = run = None
                        e["ms"] = bench_ms(p.ours(**kw), warmup=5, rep=50)
                except Exception as exc:  # noqa: BLE001
                    e["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                finally:
                    pw.STREAM_TILES[kind] = saved
                entries.append(e)
                log("sweep", kind, part, e)
            ok = [
                e
                for e in entries
                if "ms" in e
                and e["out_rel_diff_vs_default"] < (5e-2 if kind == "bf16" else 1e-3)
                and (e["bits_equal_default"] or part not in ("split", "presplit"))
            ]
            if ok and part == "presplit":
                scan, presplit = min(ok, key=lambda e: e["ms"])["tile"]
                best["scan"], best["presplit"] = tuple(scan), tuple(presplit)
            elif ok:
                best[part] = tuple(min(ok, key=lambda e: e["ms"])["tile"])
            res[f"{kind}_{part}"] = entries
        res[f"{kind}_best"] = {k: list(v) for k, v in best.items()}
        if adopt:
            pw.STREAM_TILES[kind] = best
        if not SMOKE:
            torch.cuda.empty_cache()
    defaults = pw.STREAM_TILES["fp32"]
    swept = {k: v for k, v in res.get("fp32_best", {}).items() if tuple(v) != tuple(defaults.get(k, ()))}
    CASES["stream_swept"]["tiles"] = {k: tuple(v) for k, v in swept.items()}
    res["stream_swept_tiles"] = swept
    log("sweep best", {k: v for k, v in res.items() if k.endswith("_best")})
    return res


def log_row(part: str, row: dict) -> None:
    """A timed row on the log, without its individual runs."""
    log(
        part,
        {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in row.items()
            if not k.endswith("_runs_ms")
        },
    )


def part_lengths() -> dict:
    import torch

    rows = []
    for T in LENGTHS:
        row = timed_rows(Problem([T]))
        rows.append(row)
        log_row("lengths", row)
        if not SMOKE:
            torch.cuda.empty_cache()
    return {"rows": rows}


def varlen_lengths() -> list[int]:
    """VARLEN_T tokens as sequences of 500-1,300 tokens (seeded: every part gets the same batch)."""
    import torch

    g = torch.Generator().manual_seed(0)
    lengths, total = [], 0
    lo, hi = (500, 1300) if not SMOKE else (20, 60)
    while total < VARLEN_T:
        n = min(int(torch.randint(lo, hi + 1, (1,), generator=g)), VARLEN_T - total)
        lengths.append(n)
        total += n
    return lengths


def part_varlen() -> dict:
    lengths = varlen_lengths()
    row = timed_rows(Problem(lengths))
    log_row("varlen", row)
    return {"lengths": lengths, **row}


# bf16 scan tiles timed batch by batch (scan_batches): BV 32, the default before call16, and BV 64,
# the default since (results/bench/prefill-stream-h200/call16-18)
SCAN_BY_BATCH = [(32, 4, 3, True), (64, 4, 3, True)]
BATCH_SEQUENCES = [2, 4, 8, 16, 32]


def scan_batches() -> dict[str, list[int]]:
    """One sequence of each LENGTHS, BATCH_SEQUENCES equal sequences of SWEEP_T tokens, the varlen
    batch, one sequence of SWEEP_T / 2 among half the varlen batch's."""
    batches = {f"1 x {t}": [t] for t in LENGTHS}
    batches.update({f"{n} x {SWEEP_T // n}": [SWEEP_T // n] * n for n in BATCH_SEQUENCES})
    batches["varlen"] = varlen_lengths()
    short = varlen_lengths()[: len(varlen_lengths()) // 2]
    batches[f"{SWEEP_T // 2} + varlen half"] = [SWEEP_T // 2, *short]
    return batches


def part_scan_batches() -> dict:
    """The production form's call with each SCAN_BY_BATCH tile as its scan's, and FLA's, batch by
    batch (median of REPEATS interleaved do_bench medians)."""
    import torch

    from evalkit.kernels.kda_prefill import wrapper as pw

    tiles = pw.STREAM_TILES["bf16"]
    labels = [",".join(str(int(x)) for x in t) for t in SCAN_BY_BATCH]
    rows = []
    for label, lengths in scan_batches().items():
        p = Problem(lengths)
        row: dict = {"batch": label, "sequences": len(lengths), "T": p.T}
        runs: dict = {name: [] for name in [*labels, *([] if SMOKE else ["fla"])]}
        for _ in range(REPEATS):
            for name, tile in [*zip(labels, SCAN_BY_BATCH), *([] if SMOKE else [("fla", None)])]:
                if tile is None:
                    with torch.inference_mode():
                        runs[name].append(bench_ms(p.fla(), warmup=5, rep=50))
                    continue
                pw.STREAM_TILES["bf16"] = {**tiles, "scan": tile}
                try:
                    with torch.inference_mode():
                        runs[name].append(bench_ms(p.ours(**CASES["stream_bf16"]), warmup=5, rep=50))
                finally:
                    pw.STREAM_TILES["bf16"] = tiles
        for name, r in runs.items():
            row[f"{name}_ms"], row[f"{name}_runs_ms"] = statistics.median(r), r
        for name in labels:
            if "fla_ms" in row:
                row[f"{name}_vs_fla"] = row["fla_ms"] / row[f"{name}_ms"]
        row["last_over_first"] = row[f"{labels[-1]}_ms"] / row[f"{labels[0]}_ms"]
        rows.append(row)
        log_row("scan_batches", row)
        if not SMOKE:
            torch.cuda.empty_cache()
    return {"tiles": labels, "rows": rows}


def part_kernels() -> dict:
    import torch

    p, pv = Problem([SWEEP_T]), Problem(varlen_lengths())
    out = {}
    cases = {label: p.ours(**CASES[label]) for label in ("stream", "stream_swept", "stream_bf16")}
    cases["stream_bf16 varlen"] = pv.ours(**CASES["stream_bf16"])
    if not SMOKE:  # the peer's own split, stage by stage, as the target of each launch
        cases["fla"], cases["fla varlen"] = p.fla(), pv.fla()
    for label, fn in cases.items():
        with torch.inference_mode():
            out[label] = kernel_ms(fn)
    # the wall time of a call beside its kernels' sum: what the host adds between calls (checks,
    # launches; a device read of cu_seqlens, before it came on the host) where the GPU waits for it
    gap = {}
    for label, fn in cases.items():
        with torch.inference_mode():
            gap[label] = {
                "kernel_sum_ms": round(sum(out[label].values()), 4),
                "wall_ms": round(bench_ms(fn), 4),
            }
    out["wall_vs_kernel_sum"] = gap
    log("kernels", out)
    return out


def kernel_ms(run, n: int = 5) -> dict:
    """CUDA ms per call of `run` by kernel (torch profiler, after one warm-up call)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run()
    if SMOKE:
        return {}
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            run()
        torch.cuda.synchronize()
    kernels = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t and not ev.key.startswith(("Memcpy", "Memset", "void at::")):
            kernels[ev.key] = round(t / n / 1e3, 4)
    return dict(sorted(kernels.items(), key=lambda kv: -kv[1]))


# ------------------------------------------------------------------------------------ report
def markdown(res: dict) -> str:
    f = lambda v, nd=2: "—" if v is None else f"{v:.{nd}f}"  # noqa: E731
    sec = res.get("sections", {})
    L = [f"# KDA prefill variants vs FLA chunk_kda ({res.get('command')})", ""]
    env = sec.get("environment", {})
    L.append(f"{env.get('gpu', '?')}, torch {env.get('torch')}, triton {env.get('triton')}, fla {env.get('fla')}, code {(env.get('git') or {}).get('commit')} (dirty: {(env.get('git') or {}).get('dirty')}); "
             f"H={H}, K={K}, V={V}, bf16 inputs, medians of {REPEATS} interleaved do_bench medians.")  # fmt: skip
    for name in ("lengths", "varlen"):
        rows = sec.get(name, {}).get("rows") or ([sec[name]] if name in sec else [])
        if not rows:
            continue
        L += ["", f"## {name}", "", "| T (sequences) | " + " | ".join(f"{c} ms (× FLA)" for c in TIMED) + " | FLA ms |",
              "|---|" + "---|" * (len(TIMED) + 1)]  # fmt: skip
        for r in rows:
            cells = [f"{f(r.get(f'{c}_ms'))} ({f(r.get(f'{c}_vs_fla'))}×)" for c in TIMED]
            L.append(f"| {r['T']} ({r['sequences']}) | " + " | ".join(cells) + f" | {f(r.get('fla_ms'))} |")
    for key, sweep in (("sweep", SWEEP), ("sweep_varlen", SWEEP_VARLEN)):
        if key not in sec:
            continue
        sw = sec[key]
        shape = "the varlen batch" if sw.get("varlen") else f"T = {sw['T']}"
        L += ["", f"## Stream tiles at {shape} (adopted by the later parts: {sw['adopted']})", ""]
        for kind in ("fp32", "bf16"):
            if f"{kind}_best" not in sw:
                continue  # not swept (--sweep-kinds)
            L.append(f"- {kind}: best {sw.get(f'{kind}_best')}")
            for part in sweep[kind]:
                if f"{kind}_{part}" not in sw:
                    continue
                items = ", ".join(
                    f"{tuple(e['tile'])} {f(e.get('ms'))}" + (" ERR" if "error" in e else "")
                    for e in sw.get(f"{kind}_{part}", [])
                )
                L.append(f"  - {part}: {items}")
    if "scan_batches" in sec:
        sb = sec["scan_batches"]
        tl_ = sb["tiles"]
        L += ["", "## The bf16 form by scan tile (BV, warps, stages, fused output), batch by batch", "",
              "| batch | tokens | " + " | ".join(f"scan {t} ms (× FLA)" for t in tl_) + f" | FLA ms | {tl_[-1]} / {tl_[0]} |",
              "|---|---:|" + "---:|" * (len(tl_) + 2)]  # fmt: skip
        for r in sb["rows"]:
            cells = [f"{f(r[f'{t}_ms'], 3)} ({f(r.get(f'{t}_vs_fla'))}×)" for t in tl_]
            L.append(
                f"| {r['batch']} | {r['T']} | "
                + " | ".join(cells)
                + f" | {f(r.get('fla_ms'), 3)} | {f(r['last_over_first'], 3)} |"
            )
    if "kernels" in sec:
        L += ["", "## Per-kernel CUDA ms at 32k", ""]
        for label, ks in sec["kernels"].items():
            if label != "wall_vs_kernel_sum":
                L.append(f"- {label}: " + ", ".join(f"`{k}` {v}" for k, v in ks.items()))
        for label, g in sec["kernels"].get("wall_vs_kernel_sum", {}).items():
            L.append(
                f"- {label}: kernels sum to {g['kernel_sum_ms']} ms, a call takes {g['wall_ms']} ms (do_bench median)"
            )
    if "check" in sec:
        L += ["", "## GPU check", "", "```", json.dumps(sec["check"], indent=1), "```"]
    if res.get("errors"):
        L += ["", "## Errors", ""] + [
            f"- **{k}**: `{(v or '').splitlines()[0] if v else v}`" for k, v in res["errors"].items()
        ]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="check,sweep,lengths,varlen,kernels")
    ap.add_argument("--budget-s", type=float, default=540, help="start no part after this")
    ap.add_argument("--no-adopt", action="store_true", help="keep the wrapper's tiles after the sweep")
    ap.add_argument(
        "--sweep-only", default="", help="sweep these only (comma list: order,prep,diag,offdiag,inverse)"
    )
    ap.add_argument(
        "--sweep-kinds", default="fp32,bf16", help="operand forms the sweep parts run (comma list)"
    )
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes: test the script only")
    ap.add_argument(
        "--varlen-scan",
        default="",
        help="sweep_varlen's bf16 scan tiles instead of the list (e.g. '32,4,1,1;16,4,1,1')",
    )
    args = ap.parse_args()
    if args.smoke:
        smoke_mode()
    if args.varlen_scan:  # one tile per process: a tile that faults the GPU takes its process down
        tiles = [tuple(int(x) for x in t.split(",")) for t in args.varlen_scan.split(";")]
        SWEEP_VARLEN["bf16"]["scan"] = [(bv, nw, ns, bool(f)) for bv, nw, ns, f in tiles]
        SWEEP_VARLEN["fp32"] = {}
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    harness.import_checkout()
    clock = harness.Clock()
    res: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "sections": {}}

    def save() -> None:
        res["elapsed_s"] = round(clock.elapsed(), 1)
        (out / "bench_prefill.json").write_text(json.dumps(res, indent=2, default=str))
        (out / "bench_prefill.md").write_text(markdown(res))

    sections = harness.Sections(res, save, harness.Budget(args.budget_s, clock), log, skip_below_s=20)
    only = args.sweep_only.split(",") if args.sweep_only else None
    kinds = tuple(args.sweep_kinds.split(","))
    parts = {"check": part_check, "sweep": lambda: part_sweep(not args.no_adopt, only, kinds=kinds), "lengths": part_lengths,
             "varlen": part_varlen, "kernels": part_kernels, "scan_batches": part_scan_batches,
             "sweep_varlen": lambda: part_sweep(False, None, varlen=True)}  # fmt: skip
    sections.run("environment", environment)
    for name in filter(None, args.parts.split(",")):
        sections.run(name, parts[name])
    log("wrote", out / "bench_prefill.json")
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
