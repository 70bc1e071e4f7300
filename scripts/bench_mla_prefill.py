#!/usr/bin/env python
"""MLA prefill before/after issue 15: SDPA's own backend choice ("sdpa", the memory-efficient kernel
for Kimi-Linear's unequal q/v head dims) against the zero-padded flash route ("flash").

    python scripts/bench_mla_prefill.py --out results/bench/mla-prefill-h200          # H200, ~6 min
    python scripts/bench_mla_prefill.py --out /tmp/m --arch tiny --device cpu --len 512 --prefill-tokens 128

Two parts, each mode timed --repeats times (median and spread reported):
1. attention: the MLA attention calls of one --len prompt cut into --prefill-tokens chunks
   (7 layers' worth, random bf16 q/k/v at 48B dims: 32 heads, qk 192, v 128), no model;
2. engine: a --len-token prompt through LLMEngine on a random Kimi-Linear-48B (bf16 weights on the
   GPU, fp32 state), prefill only (1 generated token); the first token of each mode is recorded.
Writes bench_mla_prefill.json to --out (with the git commit and whether the tree was clean).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bench_engine as be  # same folder: the random model, engine kwargs, timing helpers
import torch

MODES = ["sdpa", "flash"]


def git_state() -> dict:
    def run(*cmd):
        return subprocess.run(cmd, cwd=be.REPO, capture_output=True, text=True).stdout.strip()

    return {
        "commit": run("git", "rev-parse", "HEAD") or None,
        "dirty": bool(run("git", "status", "--porcelain")),
    }


def spread(xs: list[float]) -> dict:
    return {
        "median": round(statistics.median(xs), 4),
        "min": round(min(xs), 4),
        "max": round(max(xs), 4),
        "all": xs,
    }


def chunk_shapes(length: int, chunk: int) -> list[tuple[int, int]]:
    return [(min(chunk, length - s), min(s + chunk, length)) for s in range(0, length, chunk)]


def part_attention(args, dev, report) -> None:
    from evalkit.model.layers import mla_prefill

    H, dqk, dv = (32, 192, 128) if args.arch == "real" else (2, 48, 32)
    dtype = torch.bfloat16 if be.cuda(dev) else torch.float32
    g = torch.Generator(device=dev).manual_seed(0)
    L = args.len
    k = torch.randn(H, L, dqk, device=dev, dtype=dtype, generator=g)
    v = torch.randn(H, L, dv, device=dev, dtype=dtype, generator=g)
    q = torch.randn(H, args.prefill_tokens, dqk, device=dev, dtype=dtype, generator=g)
    shapes = chunk_shapes(L, args.prefill_tokens)
    res = {"heads": H, "qk_dim": dqk, "v_dim": dv, "chunks": shapes, "layers": args.mla_layers}
    outs = {}
    for mode in args.modes:
        mla_prefill.PREFILL_ATTENTION = mode
        times = []
        for rep in range(args.repeats + 1):  # the first is a warm-up
            be.sync(dev)
            t = time.perf_counter()
            for _ in range(args.mla_layers):
                for m, ctx in shapes:
                    o = mla_prefill.causal_prefill_attention(q[:, :m], k[:, :ctx], v[:, :ctx], dqk**-0.5)
            be.sync(dev)
            if rep:
                times.append(round(time.perf_counter() - t, 4))
        outs[mode] = o.float()
        res[mode] = spread(times)
        be.log(f"attention {mode}: {res[mode]}")
    if len(outs) == 2:
        a, b = outs.values()
        res["max_abs_diff_last_chunk"] = float((a - b).abs().max())
    report["attention"] = res


def part_engine(args, dev, report) -> None:
    from evalkit.engine import LLMEngine
    from evalkit.model.layers import mla_prefill

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
            mla_prefill.PREFILL_ATTENTION = mode
            times, first = [], None
            for _ in range(args.repeats):
                r, outs = be.timed_generate(eng, [prompt], 1, dev, tqdm=False)
                times.append(r["prefill_s"])
                first = outs[0].token_ids[:1]
                res.setdefault("peak_mem_gib", {})[mode] = r.get("peak_mem_gib")
            res[mode] = {**spread(times), "first_token": first}
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
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    be.bootstrap_evalkit()
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    report: dict = {
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "args": vars(args),
        "git": git_state(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device_name": torch.cuda.get_device_name(dev) if be.cuda(dev) else "cpu",
        "torch": torch.__version__,
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
