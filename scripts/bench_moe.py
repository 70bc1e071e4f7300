"""Benchmark and GPU check of the MoE experts' decode GEMM: evalkit's Triton grouped GEMM
(`kernels/moe_gemm`, `--kernels moe_decode=triton`) against `torch._grouped_mm` (the engine's
default, CUTLASS) in the same process, at Kimi-Linear-48B's MoE dims (256 experts, top 8, hidden
2304, expert width 1024). A decode step routes a few rows to each expert, so both GEMMs are the
experts' weights streamed once: the figure is the bytes they must read over the time, against the
copy bandwidth measured in the same process.

    python scripts/bench_moe.py --out DIR          # ~3 min on an H100 or H200

Sections (each in try/except; JSON + Markdown rewritten after every section):
  environment; copy (4 GiB fp32 copy_, bytes read + written);
  correctness: each GEMM against the float64 reference on a sample of experts, the Triton GEMM's
    rows alone against the same rows in the batch (bit for bit), and how many outputs the two
    GEMMs differ in (they sum in different orders);
  gemm: per batch B (sequences; B x 8 rows, routed uniformly; with --routing also a recording's
    worst and median full-batch decode steps) and projection (gate_up: N 2048, K 2304; down: N 2304,
    K 1024), torch._grouped_mm and each Triton tile: CUDA-graph replay, median of --repeats
    interleaved do_bench medians, range, TB/s, % of copy, speed-up over torch._grouped_mm;
  layer: the MoE layer's whole decode step (router, sort, both GEMMs, SwiGLU, combine, shared
    expert) with moe_decode grouped_mm and triton (each tile's gain diluted by what it leaves).
`--smoke`: every section on the CPU interpreter at tiny dims (the script's plumbing; no meaning).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    from evalkit.bench import harness, timing
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(ROOT))
    from evalkit.bench import harness, timing

E, TOPK, HIDDEN, INTER = 256, 8, 2304, 1024
BATCHES = [128, 512]
DEV, SMOKE = "cuda", False
log = harness.Log(harness.Clock())


def smoke_mode() -> None:
    """Tiny dims on the CPU interpreter: exercises the script, not the hardware."""
    global E, TOPK, HIDDEN, INTER, BATCHES, DEV, SMOKE
    E, TOPK, HIDDEN, INTER, BATCHES, DEV, SMOKE = 8, 2, 32, 16, [4], "cpu", True
    os.environ["TRITON_INTERPRET"] = "1"


def tiles():
    """The default tile first (a stop keeps it), then its neighbours one dimension at a time."""
    from evalkit.kernels.moe_gemm.wrapper import DEFAULT_TILE as d

    if SMOKE:
        return [d]
    others = [d._replace(BN=32), d._replace(BN=128), d._replace(BK=64), d._replace(BK=256, num_stages=3)]
    others += [d._replace(BM=64), d._replace(BM=64, num_warps=8), d._replace(num_warps=8)]
    others += [d._replace(num_stages=3), d._replace(num_warps=2)]
    return list(dict.fromkeys([d, *others]))


def routed_rows(B: int, seed: int = 0):
    """The rows a decode step of B sequences gives the experts: each token's TOPK distinct experts
    (uniform), sorted by expert; offs their cumulative ends."""
    import torch

    g = torch.Generator().manual_seed(seed)
    idx = torch.rand(B, E, generator=g).topk(TOPK, dim=-1)[1].reshape(-1)
    counts = torch.bincount(idx, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    return offs.to(DEV), int((counts > 0).sum())


def offs_of(counts):
    """offs (cumulative row ends per expert, int32 on DEV) and the experts used, of row counts."""
    import torch

    c = torch.tensor(counts, dtype=torch.int64)
    return torch.cumsum(c, 0).to(torch.int32).to(DEV), int((c > 0).sum())


def row_blocks_per_expert(counts, bm: int) -> float:
    """How many times a used expert's weights are read by a tile of bm rows (1.0: each once)."""
    used = [c for c in counts if c > 0]
    return sum(-(-c // bm) for c in used) / max(len(used), 1)


def recorded_routings(path: str) -> list[tuple[str, list[int]]]:
    """(label, counts) of two decode steps a recording holds (`--routing`: a JSON with "records",
    each {"layer", "step", "counts" [E]}), at its largest batch: the step whose experts need the
    most blocks of the default tile's rows, and the median one by that measure."""
    from evalkit.kernels.moe_gemm.wrapper import DEFAULT_TILE

    recs = json.loads(Path(path).read_text())["records"]
    if any(len(r["counts"]) != E for r in recs):
        raise ValueError(f"{path}: the recording's counts are not over {E} experts")
    full = max(sum(r["counts"]) for r in recs)

    def cost(r):  # row blocks per used expert, then the largest expert's rows
        return row_blocks_per_expert(r["counts"], DEFAULT_TILE.BM), max(r["counts"])

    recs = sorted((r for r in recs if sum(r["counts"]) == full), key=cost)
    picked = [("worst", recs[-1])] + ([("median", recs[(len(recs) - 1) // 2])] if len(recs) > 1 else [])
    return [(f"{k}: layer {r['layer']} step {r['step']}", r["counts"]) for k, r in picked]


def projections(seed: int = 0) -> dict:
    """name -> (w [E, N, K] bf16, K): the gate_up and down weights of one MoE layer."""
    import torch

    g = torch.Generator(device=DEV).manual_seed(seed)
    mk = lambda n, k: (torch.randn(E, n, k, device=DEV, generator=g) * 0.02).to(torch.bfloat16)  # noqa: E731
    return {"gate_up": mk(2 * INTER, HIDDEN), "down": mk(HIDDEN, INTER)}


def gemm_fns(x, w, offs) -> dict:
    """name -> a zero-argument call: torch's grouped GEMM and the Triton GEMM per tile."""
    import torch

    from evalkit.kernels.moe_gemm.wrapper import moe_gemm

    wt = w.transpose(1, 2)
    fns = {"grouped_mm": lambda: torch._grouped_mm(x, wt, offs=offs)}
    for t in tiles():
        fns[tile_name(t)] = lambda t=t: moe_gemm(x, w, offs, t)
    return fns


def tile_name(t) -> str:
    return f"triton {t.BM}x{t.BN}x{t.BK} w{t.num_warps} s{t.num_stages}"


def environment() -> dict:
    import torch
    import triton

    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "smoke": SMOKE, "git": harness.git_state()}  # fmt: skip
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def sec_copy() -> dict:
    from evalkit.bench.engine_floor import copy_ms

    n = (4 << 30) // 4 if not SMOKE else 1 << 16
    nbytes, ms = copy_ms(n, DEV, lambda fn: timing.bench_ms(fn, 5, 50, smoke=SMOKE))
    return {"bytes": nbytes, "ms": ms, "TBps": nbytes / ms / 1e9}


def sec_correctness() -> dict:
    import torch

    from evalkit.kernels import reference
    from evalkit.kernels.moe_gemm.wrapper import moe_gemm

    out = {}
    B = BATCHES[-1]
    offs, _ = routed_rows(B)
    bounds = [0, *offs.tolist()]
    sample = sorted({0, E // 2, E - 1, *range(1, E, max(1, E // 8))})  # experts checked in float64
    for name, w in projections().items():
        x = (torch.randn(B * TOPK, w.shape[2], device=DEV) * 0.5).to(torch.bfloat16)
        ys = {
            "triton": moe_gemm(x, w, offs),
            "grouped_mm": torch._grouped_mm(x, w.transpose(1, 2), offs=offs),
        }
        row = {}
        for kind, y in ys.items():
            errs = []
            for e in sample:
                lo, hi = bounds[e], bounds[e + 1]
                if hi > lo:
                    one = torch.tensor([hi - lo], dtype=torch.int32)
                    ref = reference.moe_gemm(x[lo:hi].cpu(), w[e : e + 1].cpu(), one)
                    errs.append(float((y[lo:hi].cpu().double() - ref).abs().max() / ref.abs().max()))
            row[f"{kind}_max_rel_err"] = max(errs)
        row["differing_outputs"] = int((ys["triton"] != ys["grouped_mm"]).sum())
        row["outputs"] = ys["triton"].numel()
        alone = []
        for e in sample:  # each sampled expert's first row, alone
            lo, hi = bounds[e], bounds[e + 1]
            if hi > lo:
                one = torch.tensor([1], dtype=torch.int32, device=DEV)
                alone.append(
                    bool(torch.equal(moe_gemm(x[lo : lo + 1], w[e : e + 1], one)[0], ys["triton"][lo]))
                )
        row["rows_alone_bit_equal"] = f"{sum(alone)}/{len(alone)}"
        out[name] = row
        log("correctness", name, row)
    return out


def sec_gemm(res: dict, repeats: int, routing: str | None) -> dict:
    """Each GEMM per batch of uniformly routed rows, and on the recorded steps of `routing`."""
    import torch

    copy = res["sections"].get("copy", {}).get("TBps")
    rows = []
    weights = projections()
    cases = [("uniform", B, *routed_rows(B)) for B in BATCHES]
    for label, counts in recorded_routings(routing) if routing else []:
        cases.append((label, sum(counts) // TOPK, *offs_of(counts)))
    for routing_name, B, offs, used in cases:
        for name, w in weights.items():
            N, K = w.shape[1], w.shape[2]
            x = (torch.randn(B * TOPK, K, device=DEV) * 0.5).to(torch.bfloat16)
            nbytes = 2 * (used * N * K + B * TOPK * (K + N))  # the used experts' weights, x and y
            fns = gemm_fns(x, w, offs)
            times: dict[str, list[float]] = {k: [] for k in fns}
            errors: dict[str, str] = {}
            for _ in range(repeats):  # interleaved: a clock drift hits every case alike
                for k, fn in fns.items():
                    if k in errors:
                        continue
                    try:
                        times[k].append(timing.graph_ms(fn, smoke=SMOKE))
                    except Exception as exc:  # a tile that does not build or fit is reported, not fatal
                        errors[k] = harness.error_text(exc, 0)[:200]
            base = statistics.median(times["grouped_mm"])
            for k, ts in times.items():
                row = {"B": B, "routing": routing_name, "proj": name, "case": k}
                row |= {"experts_used": used, "bytes": nbytes}
                if k in errors:
                    rows.append(row | {"error": errors[k]})
                    continue
                ms = statistics.median(ts)
                row |= {
                    "us": round(1e3 * ms, 2),
                    "us_range": [round(1e3 * min(ts), 2), round(1e3 * max(ts), 2)],
                }
                row |= {"TBps": round(nbytes / ms / 1e9, 3), "speedup_vs_grouped_mm": round(base / ms, 3)}
                if copy:
                    row["pct_copy"] = round(100 * nbytes / ms / 1e9 / copy, 1)
                rows.append(row)
                log("gemm", row)
    return {"repeats": repeats, "rows": rows}


def sec_layer(res: dict, repeats: int) -> dict:
    """The MoE layer's decode step, moe_decode grouped_mm vs triton (the default tile)."""
    import torch

    from evalkit.kernel_choice import KernelChoice
    from evalkit.model import kimi_linear_48b_config, parse_config
    from evalkit.model.layers.moe import MoE

    raw = kimi_linear_48b_config(2)
    if SMOKE:
        raw |= {
            "num_experts": E,
            "num_experts_per_token": TOPK,
            "hidden_size": HIDDEN,
            "moe_intermediate_size": INTER,
        }
    layer = MoE(parse_config(raw), torch.float32 if SMOKE else torch.bfloat16, DEV)
    g = torch.Generator(device=DEV).manual_seed(0)
    for p in layer.parameters():  # random weights, std 0.02 (the router's bias zero)
        p.copy_(torch.randn(p.shape, device=DEV, generator=g) * 0.02 if p.dim() > 1 else torch.zeros_like(p))
    rows = []
    for B in BATCHES:
        x = (torch.randn(B, layer.w13.shape[2], device=DEV) * 0.5).to(layer.w13.dtype)
        outs, times = {}, {}
        for choice in ("grouped_mm", "triton"):
            layer.kernels = KernelChoice(moe_decode=choice)
            outs[choice] = layer(x, decode=True)
            times[choice] = []
        for _ in range(repeats):
            for choice in times:
                layer.kernels = KernelChoice(moe_decode=choice)
                step = lambda x=x: layer(x, decode=True)  # noqa: E731
                times[choice].append(timing.graph_ms(step, smoke=SMOKE))
        med = {c: statistics.median(t) for c, t in times.items()}
        row = {"B": B, **{f"{c}_us": round(1e3 * m, 1) for c, m in med.items()}}
        row |= {f"{c}_us_range": [round(1e3 * min(t), 1), round(1e3 * max(t), 1)] for c, t in times.items()}
        row["speedup"] = round(med["grouped_mm"] / med["triton"], 3)
        row["max_abs_diff"] = float((outs["triton"].float() - outs["grouped_mm"].float()).abs().max())
        rows.append(row)
        log("layer", row)
    return {"repeats": repeats, "rows": rows}


def markdown(res: dict) -> str:
    s = res["sections"]
    env = s.get("environment", {})
    lines = ["# MoE decode GEMM: Triton grouped GEMM vs torch._grouped_mm", "",
             f"GPU {env.get('gpu', '-')}, torch {env.get('torch', '-')}, triton {env.get('triton', '-')}; "
             f"copy {s.get('copy', {}).get('TBps', float('nan')):.3f} TB/s. Times: one CUDA-graph replay, "
             f"median of {s.get('gemm', {}).get('repeats', '-')} interleaved do_bench medians (range).",
             ""]  # fmt: skip
    if "gemm" in s:
        lines += [
            "| B | routing | proj | case | µs (range) | TB/s | % copy | vs grouped_mm |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in s["gemm"]["rows"]:
            head = f"| {r['B']} | {r.get('routing', 'uniform')} | {r['proj']} | {r['case']}"
            if "error" in r:
                lines.append(f"{head} | error: {r['error'][:80]} | | | |")
                continue
            lo, hi = r["us_range"]
            lines.append(f"{head} | {r['us']} ({lo}–{hi}) | {r['TBps']} | "
                         f"{r.get('pct_copy', '-')} | {r['speedup_vs_grouped_mm']}× |")  # fmt: skip
    if "layer" in s:
        lines += [
            "",
            "| B | layer step, grouped_mm µs | triton µs | speed-up | max abs diff |",
            "|---|---|---|---|---|",
        ]
        for r in s["layer"]["rows"]:
            cells = (
                r["B"],
                r["grouped_mm_us"],
                r["triton_us"],
                f"{r['speedup']}×",
                f"{r['max_abs_diff']:.3g}",
            )
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    if "correctness" in s:
        lines += ["", "Correctness: " + json.dumps(s["correctness"])]
    if res["errors"]:
        lines += ["", "Errors: " + json.dumps(res["errors"])]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds per case (median and range)")
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting sections after this")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip")
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny dims: the script's plumbing")
    ap.add_argument(
        "--routing",
        metavar="JSON",
        help='recorded decode routing ({"records": [{"layer", "step", "counts"}]}): the GEMM section '
        "also times its worst and median full-batch steps",
    )
    args = ap.parse_args()
    if args.routing and not Path(args.routing).is_file():
        ap.error(f"--routing {args.routing}: no such file (results/bench/moe-routing/record.py writes one)")
    if args.smoke:
        smoke_mode()
    harness.import_checkout()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = harness.Clock()
    res: dict = {"command": " ".join([sys.executable, *sys.argv]), "sections": {}, "errors": {}}

    def save() -> None:
        res["elapsed_s"] = round(clock.elapsed(), 1)
        (out / "bench_moe.json").write_text(json.dumps(res, indent=2, default=str))
        (out / "bench_moe.md").write_text(markdown(res))

    sections = harness.Sections(res, save, harness.Budget(args.budget_s, clock), log, skip_below_s=10)
    skip = set(filter(None, args.skip.split(",")))
    plan = [("environment", environment), ("copy", sec_copy), ("correctness", sec_correctness),
            ("gemm", lambda: sec_gemm(res, args.repeats, args.routing)),
            ("layer", lambda: sec_layer(res, args.repeats))]  # fmt: skip
    for name, fn in plan:
        if name not in skip:
            sections.run(name, fn)
    log("wrote", out / "bench_moe.json", out / "bench_moe.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
