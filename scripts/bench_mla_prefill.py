#!/usr/bin/env python
"""MLA prefill attention: SDPA's own backend choice ("sdpa": the memory-efficient kernel for
Kimi-Linear's unequal q/v head dims, the only one for fp32), the zero-padded flash route ("flash",
16-bit only) and evalkit's Triton flash-attention kernel ("triton", kernels/mla_prefill).

    python scripts/bench_mla_prefill.py --out results/bench/mla-prefill-h200          # H200
    python scripts/bench_mla_prefill.py --out /tmp/m --parts attention --tiles "fp32:64,32,4,1"
    python scripts/bench_mla_prefill.py --out /tmp/m --smoke     # CPU, tiny sizes, Triton interpreted

Two parts, each mode timed --repeats times (median and spread; a mode stops repeating once its
repeats have spent --mode-budget-s, at least one repeat):
1. attention, per --dtypes (bf16, fp32): the MLA attention calls of one --len prompt cut into
   --prefill-tokens chunks (7 layers' worth, random q/k/v at 48B dims: 32 heads, qk 192, v 128), no
   model; a warm-up of one layer's calls first. Reported per dtype: each mode's times, the ratio
   of each mode's median to triton's (same run), and each mode's max |error| on the last chunk
   against a float64 reference (head 0, last 64 queries). "flash" is not run for fp32 (SDPA has no
   fp32 flash kernel: it would time "sdpa" again). --tiles adds Triton launches with other tiles
   (BLOCK_M, BLOCK_N, num_warps, num_stages), timed as "triton[...]".
2. engine: a --len-token prompt through LLMEngine on a random Kimi-Linear-48B (bf16 weights on the
   GPU, fp32 state), prefill only (1 generated token); the first token of each mode is recorded.
Writes bench_mla_prefill.json to --out (with the git commit and whether the tree was clean).
--smoke: tiny model on the CPU with TRITON_INTERPRET=1 (the Triton kernel in Triton's interpreter),
--len 160 --prefill-tokens 64 --repeats 1 --mla-layers 2: checks that every part runs (~2 min),
times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import bench_engine as be  # same folder: the random model, engine kwargs, timing helpers
import torch

MODES = ["sdpa", "flash", "triton"]


def chunk_shapes(length: int, chunk: int) -> list[tuple[int, int]]:
    return [(min(chunk, length - s), min(s + chunk, length)) for s in range(0, length, chunk)]


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
REF_QUERIES = 64  # queries of the last chunk (head 0) checked against the float64 reference


def parse_tiles(spec: str) -> dict[str, list[tuple[int, ...]]]:
    """ "bf16:128,128,8,2;64,64,4,2;fp32:64,32,4,1" -> {"bf16": [(128, 128, 8, 2), (64, 64, 4, 2)],
    "fp32": [(64, 32, 4, 1)]}: a tile without a dtype takes the one before it."""
    tiles: dict[str, list[tuple[int, ...]]] = {}
    name = None
    for item in filter(None, spec.split(";")):
        name, numbers = item.split(":") if ":" in item else (name, item)
        tile = tuple(int(x) for x in numbers.split(","))
        if name not in DTYPES or len(tile) != 4:
            raise SystemExit(
                f"--tiles: {item!r} is not DTYPE:BLOCK_M,BLOCK_N,warps,stages (DTYPE in {sorted(DTYPES)})"
            )
        tiles.setdefault(name, []).append(tile)
    return tiles


def attention_calls(args, dtype_name: str) -> dict:
    """mode -> a function running one layer's attention calls of the chunked prompt (returns the
    last output). The modes are `causal_prefill_attention`'s; "triton[...]" launch the kernel directly."""
    from evalkit.kernels.mla_prefill.wrapper import mla_prefill_attention
    from evalkit.model.layers import mla_prefill

    def through_layer(mode):
        def run(q, k, v, shapes, scale):
            for m, ctx in shapes:
                o = mla_prefill.causal_prefill_attention(q[:, :m], k[:, :ctx], v[:, :ctx], scale, mode=mode)
            return o

        return run

    def with_tile(tile):
        def run(q, k, v, shapes, scale):
            for m, ctx in shapes:
                o = mla_prefill_attention(q[:, :m], k[:, :ctx], v[:, :ctx], scale, tile=tile)
            return o

        return run

    modes = [m for m in args.modes if not (m == "flash" and DTYPES[dtype_name] == torch.float32)]
    calls = {mode: through_layer(mode) for mode in modes}
    for tile in parse_tiles(args.tiles).get(dtype_name, []):
        calls[f"triton[{','.join(map(str, tile))}]"] = with_tile(tile)
    return calls


def time_mode(run, inputs, dev, layers: int, repeats: int, budget_s: float) -> tuple[list[float], object]:
    """Wall times of `layers` x one layer's calls, after a one-layer warm-up."""
    out = run(*inputs)
    be.sync(dev)
    times: list[float] = []
    while len(times) < repeats and (not times or sum(times) < budget_s):
        t = time.perf_counter()
        for _ in range(layers):
            out = run(*inputs)
        be.sync(dev)
        times.append(round(time.perf_counter() - t, 4))
    return times, out


def part_attention(args, dev, report) -> None:
    from evalkit.kernels.mla_prefill.reference import mla_prefill_attention as reference

    H, dqk, dv = (32, 192, 128) if args.arch == "real" else (2, 48, 32)
    L = args.len
    shapes = chunk_shapes(L, args.prefill_tokens)
    res = {"heads": H, "qk_dim": dqk, "v_dim": dv, "chunks": shapes, "layers": args.mla_layers}
    for dtype_name in args.dtypes:
        dtype = DTYPES[dtype_name]
        g = torch.Generator(device=dev).manual_seed(0)
        k = torch.randn(H, L, dqk, device=dev, dtype=dtype, generator=g)
        v = torch.randn(H, L, dv, device=dev, dtype=dtype, generator=g)
        q = torch.randn(H, args.prefill_tokens, dqk, device=dev, dtype=dtype, generator=g)
        m_last, _ = shapes[-1]
        n_ref = min(REF_QUERIES, m_last)
        ref = reference(q[:1, m_last - n_ref : m_last], k[:1], v[:1], dqk**-0.5)
        out: dict = {}
        for mode, run in attention_calls(args, dtype_name).items():
            try:
                times, o = time_mode(
                    run, (q, k, v, shapes, dqk**-0.5), dev, args.mla_layers, args.repeats, args.mode_budget_s
                )
            except Exception as exc:  # noqa: BLE001 - one mode failing (e.g. out of memory) keeps the rest
                out[mode] = {"error": f"{type(exc).__name__}: {exc}"}
                be.log(f"attention {dtype_name} {mode} FAILED: {out[mode]['error']}")
                continue
            err = float((o[:1, -n_ref:].double() - ref).abs().max())
            out[mode] = {**be.spread(times), "max_abs_err_vs_f64": err}
            be.log(f"attention {dtype_name} {mode}: {out[mode]}")
            del o
            be.free_memory(dev)
        tri = out.get("triton", {}).get("median")
        if tri:
            out["median_over_triton"] = {
                mode: round(r["median"] / tri, 3)
                for mode, r in out.items()
                if isinstance(r, dict) and "median" in r
            }
            be.log(f"attention {dtype_name} median / triton's: {out['median_over_triton']}")
        res[dtype_name] = out
        del q, k, v
        be.free_memory(dev)
    report["attention"] = res


def part_engine(args, dev, report) -> None:
    from evalkit.engine import LLMEngine
    from evalkit.kernel_choice import KernelChoice

    loaded, report["model"] = be.build_model(argparse.Namespace(arch=args.arch), dev)
    prompt = be.make_prompts(1, loaded.arch.vocab_size, args.len, seed=3)[0][: args.len]
    kw = dict(
        device=str(dev),
        max_model_len=len(prompt) + 8,
        max_num_seqs=2,
        decode_width=1,
        batch_invariant=False,
        max_num_batched_tokens=args.prefill_tokens,
        prefill_chunk_size=args.prefill_tokens,
    )
    eng = LLMEngine(loaded, state_dtype="fp32", **kw)
    res = {"prompt_len": len(prompt)}
    try:
        be.warm(eng, [prompt[:64], prompt[64:128]], dev)
        for mode in args.modes:
            eng.model.use_kernels(KernelChoice(mla_prefill=mode))  # the one engine, each mode in turn
            times, first = [], None
            for _ in range(args.repeats):
                r, outs = be.timed_generate(eng, [prompt], 1, dev, tqdm=False)
                times.append(r["prefill_s"])
                first = outs[0].token_ids[:1]
                res.setdefault("peak_mem_gib", {})[mode] = r.get("peak_mem_gib")
            res[mode] = {**be.spread(times), "first_token": first}
            be.log(f"engine {mode}: {res[mode]}")
    finally:
        eng.close()
    report["engine_128k"] = res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--len", type=int, default=131072, help="prompt tokens")
    ap.add_argument("--prefill-tokens", type=int, default=16384, help="prefill chunk (the engine's default)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--mla-layers", type=int, default=7)
    ap.add_argument("--parts", default="attention,engine")
    ap.add_argument("--arch", choices=["real", "tiny"], default="real")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtypes", default="bf16,fp32", help="input dtypes of the attention part")
    ap.add_argument("--tiles", default="", help='extra Triton tiles, e.g. "bf16:128,128,8,2;fp32:64,32,4,1"')
    ap.add_argument("--mode-budget-s", type=float, default=120.0, help="stop repeating a mode after this")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, Triton interpreted")
    args = ap.parse_args()
    if args.smoke:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            ap.error("--smoke needs TRITON_INTERPRET=1 before triton is imported")
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
        args.arch, args.device, args.len, args.prefill_tokens, args.repeats = "tiny", "cpu", 160, 64, 1
        args.mla_layers = 2
    args.modes = args.modes.split(",")
    args.dtypes = args.dtypes.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    be.bootstrap_evalkit()
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    report: dict = {
        **be.report_header(dev, args),
        "errors": {},
    }
    parts = {"attention": part_attention, "engine": part_engine}
    for name in args.parts.split(","):
        try:
            parts[name](args, dev, report)
        except Exception as exc:  # noqa: BLE001
            report["errors"][name] = f"{type(exc).__name__}: {exc}"
            be.log(f"part {name} FAILED: {report['errors'][name]}")
        be.free_memory(dev)
        (out / "bench_mla_prefill.json").write_text(json.dumps(report, indent=2, default=str))
    be.log(f"wrote {out / 'bench_mla_prefill.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
