# ruff: noqa: E501
"""Benchmark and GPU check of evalkit's KDA kernels side by side with FLA (fla-core 0.6.0), on one GPU.

    python scripts/bench_kernels.py --out results/bench            # ~5 minutes on an H200

Sections (each in try/except; JSON + Markdown rewritten after every section, so a crash or a
timeout keeps what was measured):
  1. correctness on the GPU vs the float64 reference (decode, prefill, conv, norm; FLA's error too)
  2. copy bandwidth (4 GiB fp32 copy_, bytes read + written)
  3. decode: H=32, K=V=128, B in {1, 8, 32, 128, 512}, pool fp32/fp16/bf16, ours vs FLA
     fused_recurrent_kda (inplace_final_state + ssm_state_indices); eager and CUDA-graph timings;
     effective state bandwidth 2*B*H*K*V*bytes / time as a fraction of copy bandwidth
  4. decode tile sweep: DecodeTile (BV, num_warps and the kernel's build options) at B=128 and 512,
     graph timings, TB/s and % of copy bandwidth, the fastest twin-safe tile per pool and B (~90 s;
     alone: --skip correctness,decode,prefill,twin,prefill_detail; --sweep persist: the default tile
     and the persistent builds only; --sweep reload: the default tile and the re-reading builds;
     --sweep-repeats N: N interleaved rounds, median and range)
  5. prefill: B=1, H=32, K=V=128, T in {4k, 32k, 128k}: ours (fp32 chunk states, and bf16 chunk
     states) vs FLA chunk_kda; per-kernel breakdown at 32k; state-pass tile sweep at 32k
  6. fp32-twin check over >= 10^4 launches of random shapes (+ a truncating build that must fail)
  (the prefill variants against FLA's chunk_kda: scripts/bench_prefill.py)
Timings: triton.testing.do_bench medians. Python 3.12, torch 2.11+cu130, triton 3.6, fla-core 0.6.0.

`--smoke` runs every section on the CPU (Triton interpreter, tiny shapes, no FLA) to test this
script's plumbing without a GPU; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    from evalkit.bench import harness, timing
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(ROOT))
    from evalkit.bench import harness, timing


H, K, V = 32, 128, 128
DECODE_B = [1, 8, 32, 128, 512]
PREFILL_T = [4096, 32768, 131072]
POOLS = ["fp32", "fp16", "bf16"]
DEV = "cuda"
SMOKE = False


def smoke_mode() -> None:
    """Tiny shapes on the CPU interpreter: exercises the script, not the hardware."""
    global H, K, V, DECODE_B, PREFILL_T, DEV, SMOKE
    H, K, V, DECODE_B, PREFILL_T, DEV, SMOKE = 2, 16, 16, [1, 128], [70, 130], "cpu", True
    os.environ["TRITON_INTERPRET"] = "1"


log = harness.Log(harness.Clock())


class Bench:
    """bench_kernels.json: the harness's sections under the budget, saved with the goals and the
    markdown after each."""

    def __init__(self, out: Path, budget_s: float, twin_launches: int):
        self.out = out
        self.clock = harness.Clock()
        self.twin_launches = twin_launches
        self.res: dict = {"command": " ".join([sys.executable, *sys.argv]), "sections": {}, "errors": {}}
        budget = harness.Budget(budget_s, self.clock)
        self.sections = harness.Sections(self.res, self.save, budget, log, skip_below_s=10)

    def section(self, name: str, fn) -> None:
        self.sections.run(name, fn)

    def save(self) -> None:
        self.res["elapsed_s"] = round(self.clock.elapsed(), 1)
        self.res["goals"] = goals(self.res)
        (self.out / "bench_kernels.json").write_text(json.dumps(self.res, indent=2, default=str))
        (self.out / "bench_kernels.md").write_text(markdown(self.res))


# ------------------------------------------------------------------------------------ helpers
def bench_ms(fn, warmup=25, rep=100) -> float:
    return timing.bench_ms(fn, warmup, rep, smoke=SMOKE)


def graph_ms(fn, warmup=10, rep=100) -> float:
    """Median time of one replay of a CUDA graph that captured fn() once."""
    return timing.graph_ms(fn, warmup, rep, smoke=SMOKE)


def time_graph_cases(
    row: dict, cases: dict, state_bytes: int, copy_tbps: float | None, eager: bool = False
) -> None:
    """Time each decode case replayed in a CUDA graph into `row`: microseconds, the state's bytes
    (read and written) over that time, its fraction of copy bandwidth; a failing case leaves its
    error and the others run; the speedup over FLA where both ran."""
    for label, fn in cases.items():
        try:
            if eager:
                row[f"{label}_eager_us"] = 1e3 * bench_ms(fn)
            row[f"{label}_graph_us"] = us = 1e3 * graph_ms(fn)
            row[f"{label}_TBps"] = state_bytes / (us * 1e-6) / 1e12
            if copy_tbps:
                row[f"{label}_frac_copy"] = row[f"{label}_TBps"] / copy_tbps
        except Exception as exc:
            row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if "fla_graph_us" in row and "ours_graph_us" in row:
        row["speedup_vs_fla"] = row["fla_graph_us"] / row["ours_graph_us"]


def time_prefill_cases(row: dict, cases: dict, tokens: int) -> None:
    """Time each prefill case (eager, inference mode) into `row`: milliseconds and Mtok/s; a
    failing case leaves its error; the speedup over FLA where both ran."""
    import torch

    for label, fn in cases.items():
        try:
            with torch.inference_mode():
                ms = bench_ms(fn, warmup=10, rep=60 if tokens > 32768 else 100)
            row[f"{label}_ms"], row[f"{label}_Mtok_s"] = ms, tokens / ms / 1e3
        except Exception as exc:
            row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if "fla_ms" in row and "ours_ms" in row:
        row["speedup_vs_fla"] = row["fla_ms"] / row["ours_ms"]


def log_row(kind: str, row: dict) -> None:
    log(kind, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})


def rel_err(a, b) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def environment() -> dict:
    import torch
    import triton

    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "host": platform.node(), "smoke": SMOKE}  # fmt: skip
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    try:
        import fla

        env["fla"] = getattr(fla, "__version__", "?")
    except Exception as exc:
        env["fla"] = f"unavailable: {exc}"
    try:
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except Exception:
        pass
    try:
        env["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                           text=True, timeout=10).stdout.strip()  # fmt: skip
    except Exception:
        pass
    return env


def decode_case(B, pool_name):
    """Inputs and a pool stored in state format `pool_name` (fp32, fp16, bf16, or any format name)."""
    import torch

    from evalkit.kernels import parse_format, round_to_format
    from evalkit.kernels.testing import kda_inputs, random_pool

    x = kda_inputs(B, H, K, V, dtype=torch.bfloat16, device=DEV)
    S = 2 * B + 8
    base = parse_format(pool_name.split("-")[0])
    pool = round_to_format(random_pool(S, H, K, V, torch.float32, device=DEV), base)
    slots = torch.randperm(S, device=DEV)[:B].to(torch.int32)
    return x, pool, slots


def store_kw(pool_name: str, B: int) -> dict:
    """The kernels' store arguments of format `pool_name` (positions for stochastic rounding)."""
    import torch

    return {"fmt": pool_name, "sr_seed": 1, "positions": torch.arange(B, device=DEV) * 977 + 5}


def pool_bytes(pool_name: str) -> int:
    from evalkit.kernels import parse_format

    return parse_format(pool_name).pool_dtype.itemsize


def fla_decode_fn(x, pool, slots):
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

    q, k, v, g = (t[:, None] for t in (x.q, x.k, x.v, x.g_raw))  # [B, 1, H, *]
    beta = x.beta_raw[:, None]
    idx = slots.long()

    def run():
        return fused_recurrent_kda_fwd(
            q=q, k=k, v=v, g=g, beta=beta, A_log=x.A_log, dt_bias=x.dt_bias, scale=K**-0.5,
            initial_state=pool, inplace_final_state=True, ssm_state_indices=idx,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
        )  # fmt: skip

    return run


def fla_chunk_fn(x, h0):
    from fla.ops.kda import chunk_kda

    q, k, v, g, beta = (t[None] for t in (x.q, x.k, x.v, x.g_raw, x.beta_raw))

    def run():
        return chunk_kda(
            q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, output_final_state=True,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
            A_log=x.A_log, dt_bias=x.dt_bias,
        )  # fmt: skip

    return run


# ------------------------------------------------------------------------------------ sections
def sec_correctness() -> dict:
    import torch

    from evalkit.kernels import (
        STATE_DTYPES,
        causal_conv1d_decode,
        causal_conv1d_prefill,
        gated_rmsnorm,
        kda_decode,
        kda_prefill,
        reference,
    )  # fmt: skip
    from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool

    out = {}
    # decode, every pool dtype, real head shape
    for name, dt in STATE_DTYPES.items():
        x, pool, slots = decode_case(4, name)
        pool_ref = pool.double().cpu()
        o = kda_decode(*x.args(), pool, slots)
        x32 = kda_inputs(4, H, K, V)  # fp32 inputs: the fp32 error, free of bf16 output rounding
        for t_name in ("q", "k", "v", "g_raw", "beta_raw"):
            setattr(x32, t_name, getattr(x, t_name).float().cpu())
        x32.A_log, x32.dt_bias = x.A_log.cpu(), x.dt_bias.cpu()
        o_ref = reference.kda_decode(*x32.args(), pool_ref, slots.cpu())
        touched = slots.long().cpu()
        got = pool.cpu()[touched].double()
        want = pool_ref[touched].to(dt).double()
        out[f"decode_{name}"] = {
            "out_rel_err_bf16_output": rel_err(o, o_ref),
            "pool_rel_err": rel_err(pool.cpu()[touched], pool_ref[touched]),
            "pool_elems_differing_from_reference_rounding": int((got != want).sum()),
            "pool_elems": int(got.numel()),
        }
    # prefill (fp32 inputs, so the output error is the kernel's own), fp32 and bf16 pools, bf16 boundaries
    lengths = [200, 1, 77]
    xf = kda_inputs(sum(lengths), H, K, V, dtype=torch.float32, device=DEV)
    cu = random_cu_seqlens(lengths, device=DEV)
    init = torch.tensor([True, False, True], device=DEV)
    xc = kda_inputs(1, H, K, V)
    for a in ("q", "k", "v", "g_raw", "beta_raw", "A_log", "dt_bias"):
        setattr(xc, a, getattr(xf, a).cpu())
    for name, intra in (("fp32", None), ("bf16", None), ("fp32", torch.bfloat16)):
        pool = random_pool(5, H, K, V, STATE_DTYPES[name], device=DEV)
        slots = torch.tensor([4, 0, 2], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        o = kda_prefill(*xf.args(), pool, slots, cu, init, intra_chunk_dtype=intra)
        o_ref = reference.kda_prefill(*xc.args(), pool_ref, slots.cpu(), cu.cpu(), init.cpu(),
                                      intra_chunk_dtype=intra)  # fmt: skip
        key = f"prefill_{name}" + ("_bf16_chunk_states" if intra is not None else "")
        out[key] = {
            "out_rel_err": rel_err(o, o_ref),
            "pool_rel_err": rel_err(pool.cpu()[slots.long().cpu()], pool_ref[slots.long().cpu()]),
        }
        if name == "fp32" and intra is None:
            try:  # FLA's chunk_kda on the same fp32 inputs, fp32 state, for comparison
                with torch.inference_mode():
                    x1 = kda_inputs(1, H, K, V)
                    for a in ("q", "k", "v", "g_raw", "beta_raw", "A_log", "dt_bias"):
                        setattr(
                            x1, a, getattr(xf, a)[:200] if a not in ("A_log", "dt_bias") else getattr(xf, a)
                        )
                    h0 = torch.zeros(1, H, K, V, device=DEV)
                    o_fla, ht = fla_chunk_fn(x1, h0)()
                    pr = torch.zeros(1, H, K, V, dtype=torch.float64)
                    x1c = kda_inputs(1, H, K, V)
                    for a in ("q", "k", "v", "g_raw", "beta_raw", "A_log", "dt_bias"):
                        setattr(x1c, a, getattr(x1, a).cpu())
                    o1 = reference.kda_prefill(*x1c.args(), pr, torch.tensor([0]), random_cu_seqlens([200]),
                                               torch.tensor([False]))  # fmt: skip
                    out["fla_chunk_kda_fp32_inputs"] = {"out_rel_err": rel_err(o_fla[0], o1),
                                                        "state_rel_err": rel_err(ht[0], pr[0])}  # fmt: skip
            except Exception as exc:
                out["fla_chunk_kda_fp32_inputs"] = f"failed: {exc}"
    # conv + norm
    C = 3 * H * K
    lens = [5, 300, 1]
    xcv = torch.randn(sum(lens), C, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(C, 4, device=DEV, dtype=torch.bfloat16)
    cpool = torch.randn(4, C, 3, device=DEV, dtype=torch.bfloat16)
    sl = torch.tensor([3, 0, 1], dtype=torch.int32, device=DEV)
    ini = torch.tensor([True, False, True], device=DEV)
    cref = cpool.cpu().clone()
    y = causal_conv1d_prefill(xcv, w, cpool, sl, random_cu_seqlens(lens, device=DEV), ini)
    y_ref = reference.causal_conv1d_prefill(
        xcv.cpu(), w.cpu(), cref, sl.cpu(), random_cu_seqlens(lens), ini.cpu()
    )
    xd = torch.randn(3, C, device=DEV, dtype=torch.bfloat16)
    yd = causal_conv1d_decode(xd, w, cpool, sl)
    yd_ref = reference.causal_conv1d_decode(xd.cpu(), w.cpu(), cref, sl.cpu())
    out["conv"] = {"prefill_rel_err": rel_err(y, y_ref), "decode_rel_err": rel_err(yd, yd_ref),
                   "pool_bit_equal": bool(torch.equal(cpool.cpu(), cref))}  # fmt: skip
    o = torch.randn(64, H, V, device=DEV)
    gt = torch.randn(64, H, V, device=DEV)
    nw = torch.randn(V, device=DEV)
    out["gated_rmsnorm"] = {
        "rel_err": rel_err(
            gated_rmsnorm(o, gt, nw, 1e-5), reference.gated_rmsnorm(o.cpu(), gt.cpu(), nw.cpu(), 1e-5)
        )
    }
    return out


def sec_copy() -> dict:
    from evalkit.bench.engine_floor import copy_ms

    n = (4 << 30) // 4 if not SMOKE else 1 << 20
    nbytes, ms = copy_ms(n, DEV, lambda fn: bench_ms(fn, warmup=5, rep=50))
    return {"bytes": nbytes, "ms": ms, "TBps": nbytes / ms / 1e9}


def sec_decode(res: dict) -> dict:
    import torch

    from evalkit.kernels import STATE_DTYPES
    from evalkit.kernels.kda_decode.wrapper import kda_decode

    copy_tbps = res["sections"].get("copy", {}).get("TBps")
    rows = []
    for B in DECODE_B:
        for name in POOLS:
            row = {"B": B, "pool": name}
            x, pool, slots = decode_case(B, name)
            state_bytes = 2 * B * H * K * V * pool_bytes(name)
            kw = store_kw(name, B)
            ours = lambda x=x, pool=pool, slots=slots, kw=kw: kda_decode(*x.args(), pool, slots, **kw)  # noqa: E731
            cases = {"ours": ours}
            if name in STATE_DTYPES:  # FLA stores fp32/fp16/bf16 by its own conversion: those pools only
                try:
                    cases["fla"] = fla_decode_fn(x, pool, slots)
                except Exception as exc:
                    row["fla_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            time_graph_cases(row, cases, state_bytes, copy_tbps, eager=True)
            rows.append(row)
            log_row("decode", row)
    torch.cuda.empty_cache()
    return {"H": H, "K": K, "V": V, "model_dtype": "bf16", "rows": rows}


# Decode sweep (issue 15): the tile and DecodeTile's build options, timed at these batch sizes for
# each pool. Not a full factorial (4 BV x 3 warps x 2 even x 3 cache hints x 2 v_inner x 2 early =
# 288 builds per pool would not fit): each build compiles once (~0.3 s) and is timed at both B
# (~0.15 s each), so a pool gets 23-26 builds, ~50 s for the three: the plain tiles; each option
# alone on the pool's default tile (what each is worth by itself); the twin-safe options all on
# (even + v_inner + early) on the 2- and 4-warp tiles with each cache hint (options and tile size
# interact: more programs in flight vs bigger ones); 16-bit pools also VEC = 8 (16-byte loads; not
# twin-safe, timed for the record only: whether a twin-safe route to 16-byte loads would pay).
# The combinations skip 8 warps: the previous sweep on an H200 (B=128, this kernel's plain build)
# had 8 warps and BV=16 slowest for every pool and 64x4 fastest (fp32 3.72 TB/s, fp16 2.65).
# num_stages is not swept: the kernel has no loop (its sm_90 PTX is the same at 1 and 3 stages).
SWEEP_B = [128, 512]
# One warp (32x1, 16x1; session 35): the 4-warp tiles split K over warps (the sm_90 build's layout
# puts warps along K), so both sums over K go through shared memory (19 barriers in the 64x4
# build); one warp sums with shuffles only (2-5 barriers, no spills: kernels/compile_check.py),
# and small programs keep more of them per SM. Not yet timed.
SWEEP_PLAIN = [(32, 4), (64, 4), (128, 4), (64, 2), (64, 8), (128, 8), (32, 1), (16, 1)]
SWEEP_COMBINED = [(32, 4), (64, 4), (128, 4), (64, 2), (32, 1), (16, 1)]
SWEEP_BUDGET_S = 150  # stop starting builds after this (what was timed is kept)
# Persistent grids (DecodeTile.persist: programs per SM, each prefetching its next tile's state): the
# 16-bit pools' 64-72% of copy bandwidth did not move with tile, vector width, cache hints or warps,
# so what is left is a program's own latency (load, two sums over K, store, in sequence).
SWEEP_PERSIST = [2, 3, 4, 8]
SWEEP_PERSIST_TILES = [(64, 4), (64, 8), (32, 4)]
# Re-reading builds (DecodeTile.reload: the state read again for the update instead of held widened
# across the first sum; Nsight Compute, decode-ncu/: every pool's step waits on its loads at 4
# programs per SM, the registers' limit, so a 16-bit pool has half the fp32 pool's bytes in flight).
SWEEP_RELOAD_TILES = [(32, 4), (64, 4), (128, 4), (64, 2), (128, 8)]
SWEEP_SET = "all"  # --sweep: "all" (every family), "persist" or "reload" (the default tile and that family)
SWEEP_REPEATS = 1  # --sweep-repeats: interleaved rounds over the builds (median and spread per build)


def decode_sweep_tiles(pool_name: str) -> list:
    """The DecodeTiles the sweep times for a pool (its default first, so a stop keeps it)."""
    from evalkit.kernels import parse_format
    from evalkit.kernels.kda_decode.wrapper import CACHE_HINTS, DecodeTile, decode_config

    fmt = parse_format(pool_name)
    default = decode_config(fmt, V)
    tiles = [default]
    if SWEEP_SET == "all":
        tiles += [DecodeTile(bv, nw) for bv, nw in SWEEP_PLAIN]
        tiles += [default._replace(**opt) for opt in ({"even": True}, {"cache": "evict_first"}, {"cache": "stream"},
                                                      {"v_inner": True}, {"early": True})]  # fmt: skip
        tiles += [DecodeTile(bv, nw, even=True, cache=c, v_inner=True, early=True)
                  for bv, nw in SWEEP_COMBINED for c in CACHE_HINTS]  # fmt: skip
        if fmt.pool_dtype.itemsize == 2:
            tiles += [default._replace(VEC=8)]
            tiles += [DecodeTile(bv, nw, 8, True, "", True, True) for bv, nw in ((64, 4), (128, 4))]
    if SWEEP_SET in ("all", "persist"):
        tiles += [DecodeTile(bv, nw, even=True, v_inner=True, early=True, persist=n)
                  for bv, nw in SWEEP_PERSIST_TILES for n in SWEEP_PERSIST]  # fmt: skip
    if SWEEP_SET in ("all", "reload"):  # the default's own counterpart too (holding the tile)
        tiles += [default._replace(reload=not default.reload)]
        tiles += [DecodeTile(bv, nw, even=True, v_inner=True, early=True, reload=True)
                  for bv, nw in SWEEP_RELOAD_TILES]  # fmt: skip
    tiles = list(dict.fromkeys(tiles))  # the default tile is also a plain sweep tile
    return tiles[:2] + tiles[-1:] if SMOKE else tiles


def sec_decode_sweep(res: dict) -> dict:
    """Graph time, TB/s and % of copy bandwidth of every sweep tile, per pool and B; the fastest
    twin-safe tile per pool and B (the candidates for DECODE_TILES) and the fastest of any."""
    import torch

    from evalkit.kernels.kda_decode.wrapper import kda_decode

    copy_tbps = res["sections"].get("copy", {}).get("TBps")
    batches = [4] if SMOKE else SWEEP_B
    out = {
        "B": batches,
        "copy_TBps": copy_tbps,
        "budget_s": SWEEP_BUDGET_S,
        "repeats": SWEEP_REPEATS,
        "set": SWEEP_SET,
        "rows": [],
        "best": {},
        "best_any": {},
    }
    plan = {name: decode_sweep_tiles(name) for name in POOLS}
    out["defaults"] = {name: tiles[0]._asdict() for name, tiles in plan.items()}
    cases = {(name, B): decode_case(B, name) for name in POOLS for B in batches}
    # one untimed run first: the first graph timed in a process ran 8-10% slow (session 36: the fp32
    # default, timed first, 81% of copy bandwidth against 89% in the sweep before and the same tile
    # in a sweep where it came later), so the default's figure would be biased
    name0, B0 = POOLS[0], batches[0]
    x, pool, slots = cases[(name0, B0)]
    graph_ms(
        lambda: kda_decode(*x.args(), pool, slots, config=plan[name0][0], **store_kw(name0, B0)),
        warmup=5,
        rep=25,
    )
    t0 = time.time()
    # pools in turn, one tile each, so a stop at the budget leaves every pool about as far along; with
    # several rounds, every build once per round (a slow stretch of the machine hits them all)
    order = [(name, i) for i in range(max(map(len, plan.values()))) for name in POOLS if i < len(plan[name])]
    rows: dict = {}
    for rnd in range(SWEEP_REPEATS):
        for n_done, (name, i) in enumerate(order):
            if time.time() - t0 > SWEEP_BUDGET_S:
                out["stopped"] = (
                    f"budget of {SWEEP_BUDGET_S} s spent in round {rnd + 1} of {SWEEP_REPEATS}: "
                    f"{len(order) - n_done} of {len(order)} builds not timed in it"
                )
                log("decode sweep", out["stopped"])
                break
            tile = plan[name][i]
            for B in batches:
                x, pool, slots = cases[(name, B)]
                row = rows.setdefault((name, i, B), {"pool": name, "B": B, "tile": tile.label(), **tile._asdict(),
                                                     "twin_safe": tile.twin_safe, "graph_us_all": []})  # fmt: skip
                kw = store_kw(name, B)
                try:
                    fn = lambda x=x, pool=pool, slots=slots, kw=kw, tile=tile: kda_decode(  # noqa: E731
                        *x.args(), pool, slots, config=tile, **kw
                    )
                    row["graph_us_all"].append(round(1e3 * graph_ms(fn, warmup=5, rep=25), 2))
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        if "stopped" in out:
            break
    for row in rows.values():
        if row["graph_us_all"]:
            row["graph_us"] = statistics.median(row["graph_us_all"])
            row["TBps"] = 2 * row["B"] * H * K * V * pool_bytes(row["pool"]) / (row["graph_us"] * 1e-6) / 1e12
            if copy_tbps:
                row["frac_copy"] = row["TBps"] / copy_tbps
        out["rows"].append(row)
    out["seconds"] = round(time.time() - t0, 1)
    for name in POOLS:
        for B in batches:
            timed = [r for r in out["rows"] if r["pool"] == name and r["B"] == B and "graph_us" in r]
            default = next((r for r in timed if r["tile"] == plan[name][0].label()), None)
            for key, rows in (("best", [r for r in timed if r["twin_safe"]]), ("best_any", timed)):
                best = min(rows, key=lambda r: r["graph_us"], default=None)
                if best and default:
                    best = {**best, "speedup_vs_default": default["graph_us"] / best["graph_us"]}
                out[key].setdefault(name, {})[str(B)] = best
            log("decode sweep best", name, B, out["best"][name][str(B)])
    for B in map(str, batches):
        a, b = (out["best"].get(p, {}).get(B) for p in ("fp16", "fp32"))
        if a and b:
            out.setdefault("fp16_over_fp32_best", {})[B] = a["graph_us"] / b["graph_us"]
    del cases
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def prefill_inputs(T):
    import torch

    from evalkit.kernels.testing import kda_inputs, random_cu_seqlens

    x = kda_inputs(T, H, K, V, dtype=torch.bfloat16, device=DEV)
    return x, random_cu_seqlens([T], device=DEV)


def sec_prefill() -> dict:
    import torch

    from evalkit.kernels.kda_prefill.wrapper import kda_prefill

    rows = []
    for T in PREFILL_T:
        row = {"T": T}
        x, cu = prefill_inputs(T)
        pool = torch.zeros(1, H, K, V, device=DEV)
        slot = torch.zeros(1, dtype=torch.int32, device=DEV)
        init = torch.ones(1, dtype=torch.bool, device=DEV)
        args = (*x.args(), pool, slot, cu, init)
        cases = {  # the split variant, as measured before bench_prefill.py took over the prefill
            "ours_fp32_states": lambda args=args: kda_prefill(*args, variant="split"),
            "ours_bf16_states": lambda args=args: kda_prefill(
                *args, variant="split", intra_chunk_dtype=torch.bfloat16
            ),
        }
        try:
            h0 = torch.zeros(1, H, K, V, device=DEV)
            cases["fla"] = fla_chunk_fn(x, h0)
        except Exception as exc:
            row["fla_error"] = str(exc)[:300]
        rep = 100 if T <= 32768 else 60
        for label, fn in cases.items():
            try:
                with torch.inference_mode():
                    ms = bench_ms(fn, warmup=10, rep=rep)
                row[f"{label}_ms"] = ms
                row[f"{label}_Mtok_s"] = T / ms / 1e3
            except Exception as exc:
                row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if "fla_ms" in row and "ours_fp32_states_ms" in row:
            row["fp32_states_vs_fla"] = row["fla_ms"] / row["ours_fp32_states_ms"]
        rows.append(row)
        log("prefill", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
        cases = args = None
        torch.cuda.empty_cache()
    return {"H": H, "K": K, "V": V, "B": 1, "model_dtype": "bf16", "rows": rows}


def _own_kernel(name: str) -> bool:
    """A profiler row worth a line in the note: a launched kernel, not a copy or a torch helper."""
    return not name.startswith(("Memcpy", "Memset", "void at::"))


def kernel_ms(run, n: int = 5) -> dict:
    """CUDA time per call of `run` by kernel (profiler, after one warm-up call), largest 12 first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run()
    kernels = {}
    events = []
    if not SMOKE:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                run()
            torch.cuda.synchronize()
        events = prof.key_averages()
    for ev in events:
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t:
            kernels[ev.key] = round(t / n / 1e3, 4)  # ms per call
    return dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:12])


def sec_prefill_detail() -> dict:
    """Per-kernel CUDA time at T=32k (profiler), and a sweep of the sequential state pass tile: the
    split variant's (the stream variant's tiles are swept by bench_prefill.py)."""
    import torch

    from evalkit.kernels.kda_prefill import wrapper as pw

    T = PREFILL_T[1]
    x, cu = prefill_inputs(T)
    pool = torch.zeros(1, H, K, V, device=DEV)
    slot = torch.zeros(1, dtype=torch.int32, device=DEV)
    init = torch.ones(1, dtype=torch.bool, device=DEV)
    run = lambda: pw.kda_prefill(*x.args(), pool, slot, cu, init, variant="split")  # noqa: E731
    out = {"T": T, "kernel_ms": kernel_ms(run), "state_pass_sweep": []}
    default = pw.STATE_PASS_TILE
    for tile in [default, (16, 4, 1, 16), (32, 4, 1, 16), (64, 8, 1, 16), (32, 8, 1, 32), (16, 8, 2, 16)]:
        pw.STATE_PASS_TILE = tile
        try:
            out["state_pass_sweep"].append(
                {"tile": list(tile), "prefill_ms": bench_ms(run, warmup=5, rep=50)}
            )
        except Exception as exc:
            out["state_pass_sweep"].append({"tile": list(tile), "error": str(exc)[:300]})
        finally:
            pw.STATE_PASS_TILE = default
    try:
        out["dot_precision_tf32_prefill_ms"] = bench_ms(
            lambda: pw.kda_prefill(*x.args(), pool, slot, cu, init, variant="split", dot_precision="tf32"),
            warmup=5,
            rep=50,
        )
    except Exception as exc:
        out["dot_precision_tf32_error"] = str(exc)[:300]
    log("prefill detail", out)
    return out


def sec_twin(bench: Bench) -> dict:
    from evalkit.commands.verify_kernels import run_launches

    n = bench.twin_launches
    t = time.time()
    done = {"n": 0}

    def progress(i):
        done["n"] = i
        if i % 1000 == 0:
            log(f"twin {i}/{n} ({time.time() - t:.0f} s)")

    checker = run_launches(n, DEV, seed=None, progress=progress)
    out = {"launches": n, "checked": checker.checked, "passed": checker.passed, "summary": checker.summary(),
           "seconds": round(time.time() - t, 1)}  # fmt: skip
    wrong = run_launches(50 if not SMOKE else 2, DEV, seed=None, rounding="wrong")
    out["self_test_truncating_build"] = {"checked": wrong.checked, "caught": wrong.checked - wrong.passed}
    log("twin", {k: v for k, v in out.items() if k != "summary"})
    return out


# ------------------------------------------------------------------------------------ report
def goals(res: dict) -> dict:
    g = {}
    sec = res.get("sections", {})
    rows = sec.get("decode", {}).get("rows", [])

    def pick(B, pool, key):
        for r in rows:
            if r["B"] == B and r["pool"] == pool:
                return r.get(key)
        return None

    big = [B for B in DECODE_B if B >= 128]
    if rows:
        for pool in ("fp32", "fp16"):
            fr = [pick(B, pool, "ours_frac_copy") for B in big]
            if all(f is not None for f in fr):
                g[f"decode_{pool}_>=90pct_copy_bw"] = {
                    "met": min(fr) >= 0.90,
                    "measured": [round(f, 3) for f in fr],
                }
        sp = [pick(B, "fp16", "speedup_vs_fla") for B in big]
        if all(s is not None for s in sp):
            g["decode_fp16_>=1.8x_fla_fp16"] = {"met": min(sp) >= 1.8, "measured": [round(s, 2) for s in sp]}
        ratio = []
        for B in big:
            a, b = pick(B, "fp16", "ours_graph_us"), pick(B, "fp32", "ours_graph_us")
            if a and b:
                ratio.append(a / b)
        if ratio:
            g["decode_fp16/fp32_time_<=0.55"] = {
                "met": max(ratio) <= 0.55,
                "measured": [round(r, 3) for r in ratio],
            }
    for r in sec.get("prefill", {}).get("rows", []):
        if r["T"] == 32768 and "fp32_states_vs_fla" in r:
            g["prefill_32k_fp32_states_>=_fla"] = {"met": r["fp32_states_vs_fla"] >= 1.0,
                                                   "measured": round(r["fp32_states_vs_fla"], 3)}  # fmt: skip
    tw = sec.get("twin")
    if tw:
        g["twin_check_>=1e4_launches_all_pass"] = {"met": tw["launches"] >= 10000 and tw["passed"] == tw["checked"],
                                                   "measured": f"{tw['passed']}/{tw['checked']}"}  # fmt: skip
    return g


def _f(v, nd=1):
    return "—" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def _bw(r: dict, p: str) -> str:
    frac = r.get(p + "_frac_copy")
    return f"{_f(r.get(p + '_TBps'), 2)} ({_f(100 * frac, 0) if frac else '—'}%)"


def _pf(r: dict, p: str) -> str:
    return f"{_f(r.get(p + '_ms'), 2)} ms, {_f(r.get(p + '_Mtok_s'), 2)}"


def decode_sweep_markdown(sw: dict) -> list[str]:
    """The decode sweep as one row per pool and tile, a column pair per B, then the best ones."""
    batches = sw.get("B") or []
    L = ["", f"### Decode tile sweep (graph µs; BW = 2·B·H·K·V·bytes / time, % of copy bandwidth; "
         f"{sw.get('seconds', '?')} s)", "",
         "Tiles: BVxwarps, then the options on (`DecodeTile`); *twin-safe* = the fp32-twin check can "
         f"hold it (VEC ≤ 4). µs: median of {sw.get('repeats', 1)} interleaved rounds (range).", "",
         "| pool | tile | twin-safe | " + " | ".join(f"B={b} µs | B={b} TB/s (% copy)" for b in batches) + " |",
         "|---|---|---|" + "---|---|" * len(batches)]  # fmt: skip
    cells: dict = {}
    for r in sw.get("rows", []):
        cells.setdefault((r["pool"], r["tile"]), {})[r["B"]] = r
    pools = list(dict.fromkeys(p for p, _ in cells))  # measured in turn; shown one pool after another
    for (pool, tile), by_b in sorted(cells.items(), key=lambda c: pools.index(c[0][0])):
        cols = []
        for b in batches:
            r = by_b.get(b, {})
            frac = r.get("frac_copy")
            reps = r.get("graph_us_all") or []
            span = f" ({_f(min(reps))}–{_f(max(reps))})" if len(reps) > 1 else ""
            cols += [_f(r.get("graph_us")) + span if "error" not in r else "error",
                     f"{_f(r.get('TBps'), 2)} ({_f(100 * frac, 0) if frac else '—'}%)"]  # fmt: skip
        safe = next(iter(by_b.values())).get("twin_safe", True)
        L.append(f"| {pool} | {tile} | {'yes' if safe else 'no'} | " + " | ".join(cols) + " |")
    for key, what in (("best", "Fastest twin-safe tile"), ("best_any", "Fastest of any")):
        for pool, by_b in sw.get(key, {}).items():
            for b, r in by_b.items():
                if r:
                    L.append(f"- {what}, {pool}, B={b}: `{r['tile']}` {_f(r['graph_us'])} µs, "
                             f"{_f(r.get('TBps'), 2)} TB/s ({_f(100 * r['frac_copy'], 0) if r.get('frac_copy') else '—'}% copy), "
                             f"{_f(r.get('speedup_vs_default'), 2)}× the default tile")  # fmt: skip
    for b, ratio in sw.get("fp16_over_fp32_best", {}).items():
        L.append(f"- fp16 / fp32 time at B={b}, best twin-safe tiles: {ratio:.3f} (goal ≤ 0.55)")
    if sw.get("stopped"):
        L.append(f"- stopped: {sw['stopped']}")
    return L


def markdown(res: dict) -> str:
    env = res.get("sections", {}).get("environment", {})
    L = ["# KDA kernels: benchmark and GPU check", "",
         f"- machine: {env.get('gpu', '?')} ({env.get('sm_count', '?')} SMs), driver/mem/clock: {env.get('driver', '?')}",
         f"- software: python {env.get('python')}, torch {env.get('torch')}, triton {env.get('triton')}, "
         f"fla {env.get('fla')}; evalkit commit {env.get('git_commit', '?')}",
         f"- command: `{res.get('command')}`", f"- wall time: {res.get('elapsed_s')} s", ""]  # fmt: skip
    if res.get("goals"):
        L += ["## Goals", "", "| goal | met | measured |", "|---|---|---|"]
    for k, v in res.get("goals", {}).items():
        L.append(f"| {k} | {'**yes**' if v['met'] else '**no**'} | {v['measured']} |")
    sec = res.get("sections", {})
    if "copy" in sec:
        L += ["", f"Copy bandwidth (4 GiB fp32 copy_, read + write): **{sec['copy']['TBps']:.2f} TB/s**."]
    if "decode" in sec:
        L += ["", "## Decode (H=32, K=V=128, bf16 q/k/v, state pool updated in place at random slots)", "",
              "Times in µs (do_bench median). *graph* = one CUDA-graph replay (kernel time; how the engine "
              "launches). BW = 2·B·H·K·V·bytes / graph time.", "",
              "| B | pool | ours eager | ours graph | ours BW TB/s (% copy) | FLA eager | FLA graph | FLA BW (% copy) | ours vs FLA |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in sec["decode"]["rows"]:
            L.append(f"| {r['B']} | {r['pool']} | {_f(r.get('ours_eager_us'))} | {_f(r.get('ours_graph_us'))} | "
                     f"{_bw(r, 'ours')} | {_f(r.get('fla_eager_us'))} | {_f(r.get('fla_graph_us'))} | "
                     f"{_bw(r, 'fla')} | {_f(r.get('speedup_vs_fla'), 2)}× |")  # fmt: skip
    if "decode_sweep" in sec:
        L += decode_sweep_markdown(sec["decode_sweep"])
    if "prefill" in sec:
        L += ["", "## Prefill (B=1, H=32, K=V=128, bf16 inputs)", "",
              "| T | ours, fp32 chunk states (ms, Mtok/s) | ours, bf16 chunk states | FLA chunk_kda | ours fp32 vs FLA |",
              "|---|---|---|---|---|"]  # fmt: skip
        for r in sec["prefill"]["rows"]:
            L.append(f"| {r['T']} | {_pf(r, 'ours_fp32_states')} | {_pf(r, 'ours_bf16_states')} | {_pf(r, 'fla')} | "
                     f"{_f(r.get('fp32_states_vs_fla'), 2)}× |")  # fmt: skip
    if "prefill_detail" in sec:
        d = sec["prefill_detail"]
        L += ["", "### Prefill at T=32k: per-kernel time (ms per prefill)", ""]
        L += [f"- `{k}`: {v}" for k, v in d.get("kernel_ms", {}).items()]
        L += [
            "",
            "State-pass tile sweep (BV, warps, stages, rows): "
            + ", ".join(
                f"{tuple(s['tile'])}: {_f(s.get('prefill_ms'), 2)} ms" for s in d.get("state_pass_sweep", [])
            ),
        ]
        if "dot_precision_tf32_prefill_ms" in d:
            L.append(
                f"Same with single-pass tf32 dots (less accurate, for scale only): "
                f"{d['dot_precision_tf32_prefill_ms']:.2f} ms"
            )
    if "twin" in sec:
        t = sec["twin"]
        L += [
            "",
            "## fp32-twin check on the GPU",
            "",
            f"{t['passed']} of {t['checked']} random-shape launches passed ({t['seconds']} s). "
            f"Truncating build: caught {t['self_test_truncating_build']['caught']} of "
            f"{t['self_test_truncating_build']['checked']}.",
            "",
            "| launch | checked | passed |",
            "|---|---|---|",
        ]
        for k, v in t["summary"].items():
            L.append(f"| {k} | {v['checked']} | {v['passed']} |")
    if "correctness" in sec:
        L += ["", "## Correctness on the GPU vs the float64 reference (relative max error)", "", "```",
              json.dumps(sec["correctness"], indent=1), "```"]  # fmt: skip
    if res.get("errors"):
        L += ["", "## Errors", ""]
        for k, v in res["errors"].items():
            L += [f"- **{k}**: `{v.splitlines()[0] if v else v}`"]
    return "\n".join(L) + "\n"


def main() -> int:
    global SWEEP_SET, SWEEP_REPEATS, SWEEP_BUDGET_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for bench_kernels.json / bench_kernels.md")
    ap.add_argument("--budget-s", type=float, default=340, help="stop starting new sections after this")
    ap.add_argument("--twin-launches", type=int, default=10000)
    ap.add_argument("--skip", default="", help="comma-separated section names to skip")
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes: test the script only")
    ap.add_argument(
        "--sweep", choices=["all", "persist", "reload"], default="all", help="which decode tiles to sweep"
    )
    ap.add_argument("--sweep-repeats", type=int, default=1, help="interleaved rounds of the decode sweep")
    ap.add_argument(
        "--sweep-budget-s", type=float, default=SWEEP_BUDGET_S, help="stop starting sweep builds after"
    )
    ap.add_argument(
        "--formats",
        default=None,
        help="comma-separated state formats for the decode sections (default fp32,fp16,bf16), "
        "e.g. fp32,fp16,bf16,fp8_e4m3,fp8_e5m2,m7,fp16-sr,bf16-rtz",
    )
    args = ap.parse_args()
    SWEEP_SET, SWEEP_REPEATS, SWEEP_BUDGET_S = args.sweep, max(1, args.sweep_repeats), args.sweep_budget_s
    if args.smoke:
        smoke_mode()
        args.twin_launches = min(args.twin_launches, 4)
    if args.formats:
        harness.import_checkout()
        from evalkit.kernels import FormatError, parse_format

        try:
            POOLS[:] = [parse_format(f).name for f in args.formats.split(",") if f.strip()]
        except FormatError as exc:
            ap.error(str(exc))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    harness.import_checkout()
    b = Bench(out, args.budget_s, args.twin_launches)
    skip = set(filter(None, args.skip.split(",")))
    plan = [
        ("environment", environment),
        ("correctness", sec_correctness),
        ("copy", sec_copy),
        ("decode", lambda: sec_decode(b.res)),
        ("prefill", sec_prefill),
        ("twin", lambda: sec_twin(b)),
        ("decode_sweep", lambda: sec_decode_sweep(b.res)),
        ("prefill_detail", sec_prefill_detail),
    ]
    for name, fn in plan:
        if name not in skip:
            b.section(name, fn)
    log("done", json.dumps(b.res["goals"], indent=1))
    log("wrote", out / "bench_kernels.json", out / "bench_kernels.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
