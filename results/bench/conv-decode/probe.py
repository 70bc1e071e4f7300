"""One-off (device): the short conv's kernels at the 48B model's KDA dims (q | k | v: 3 x 32 heads x
128 = 12,288 channels of bf16, width 4, read strided out of the fused projection, written as three
groups) per tile, every output and pool bit against the default tile's, times against a 4 GiB copy's
bandwidth in the same process (medians, rounds interleaved):
- decode, each `block_c` (channels a program convolves), B = 256 (the engine's decode width) and
  512, CUDA-graph replays (`triton.testing.do_bench_cudagraph`);
- prefill ("prefill" argument), each (`block_t`, `block_c`), a 16,301-token forward of 18 packed
  sequences (as the engine's prefill forward), half of them continuing a stored conv state;
  `triton.testing.do_bench`.

    python3 results/bench/conv-decode/probe.py OUT_JSON [prefill]"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_engine  # noqa: E402

bench_engine.bootstrap_evalkit()
import torch  # noqa: E402
import triton  # noqa: E402

from evalkit.kernels.short_conv.wrapper import (  # noqa: E402
    BC,
    BT,
    DECODE_BC,
    causal_conv1d_decode,
    causal_conv1d_prefill,
)

C, W, WIDE = 3 * 32 * 128, 4, 3 * 32 * 128 + 128 + 128 + 32
BLOCKS = (32, 64, 128, 256, 512, 1024)
TILES = ((32, 64), (32, 128), (32, 256), (64, 64), (64, 128), (64, 256), (128, 128), (16, 256))
LENGTHS = [905] * 17 + [916]  # 16,301 tokens
ROUNDS = 3


def copy_tbps() -> float:
    src = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=5, rep=50, return_mode="median")
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e12


def case(B: int, g: torch.Generator) -> dict:
    proj = torch.randn(B, WIDE, device="cuda", generator=g).to(torch.bfloat16)
    x = proj[:, :C]
    w = (torch.randn(C, W, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    pool = torch.randn(B + 1, C, W - 1, device="cuda", generator=g).to(torch.bfloat16)
    slots = torch.randperm(B + 1, device="cuda", generator=g)[:B].to(torch.int32)
    ref_pool = pool.clone()
    ref = causal_conv1d_decode(x, w, ref_pool, slots, groups=3, block_c=DECODE_BC)
    same = {}
    for bc in BLOCKS:
        p = pool.clone()
        y = causal_conv1d_decode(x, w, p, slots, groups=3, block_c=bc)
        same[bc] = bool(torch.equal(y.view(torch.int16), ref.view(torch.int16)))
        same[bc] &= bool(torch.equal(p.view(torch.int16), ref_pool.view(torch.int16)))
    times: dict[int, list[float]] = {bc: [] for bc in BLOCKS}
    for _ in range(ROUNDS):
        for bc in BLOCKS:
            ms = triton.testing.do_bench_cudagraph(
                lambda bc=bc: causal_conv1d_decode(x, w, pool, slots, groups=3, block_c=bc),
                rep=50,
                return_mode="median",
            )
            times[bc].append(ms * 1e3)
    nbytes = B * C * 2 * (2 * (W - 1) + 2)  # the pool's row read and written, x read, y written
    rows = []
    for bc in BLOCKS:
        us = statistics.median(times[bc])
        rows.append(
            {
                "B": B,
                "block_c": bc,
                "same_bits_as_default": same[bc],
                "us_median": round(us, 2),
                "us_range": [round(min(times[bc]), 2), round(max(times[bc]), 2)],
                "TBps": round(nbytes / (us * 1e-6) / 1e12, 3),
            }
        )
    return {"B": B, "bytes": nbytes, "rows": rows}


def prefill_case(g: torch.Generator) -> dict:
    T = sum(LENGTHS)
    proj = torch.randn(T, WIDE, device="cuda", generator=g).to(torch.bfloat16)
    x = proj[:, :C]
    w = (torch.randn(C, W, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    pool = torch.randn(len(LENGTHS) + 1, C, W - 1, device="cuda", generator=g).to(torch.bfloat16)
    slots = torch.arange(1, len(LENGTHS) + 1, dtype=torch.int32, device="cuda")
    cu = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    init = (torch.arange(len(LENGTHS), device="cuda") % 2 == 0).to(torch.int32)

    def run(tile, p):
        return causal_conv1d_prefill(x, w, p, slots, cu, init, groups=3, block_t=tile[0], block_c=tile[1])

    ref_pool = pool.clone()
    ref = run((BT, BC), ref_pool)
    same = {}
    for tile in TILES:
        p = pool.clone()
        y = run(tile, p)
        same[tile] = bool(torch.equal(y.view(torch.int16), ref.view(torch.int16)))
        same[tile] &= bool(torch.equal(p.view(torch.int16), ref_pool.view(torch.int16)))
    times: dict[tuple, list[float]] = {t: [] for t in TILES}
    for _ in range(ROUNDS):
        for tile in TILES:
            p = pool.clone()
            ms = triton.testing.do_bench(lambda tile=tile, p=p: run(tile, p), rep=50, return_mode="median")
            times[tile].append(ms * 1e3)
    nbytes = T * C * 2 * 2  # x read, y written (the pool rows are a few kB)
    rows = []
    for tile in TILES:
        us = statistics.median(times[tile])
        rows.append(
            {
                "T": T,
                "block_t": tile[0],
                "block_c": tile[1],
                "same_bits_as_default": same[tile],
                "us_median": round(us, 2),
                "us_range": [round(min(times[tile]), 2), round(max(times[tile]), 2)],
                "TBps": round(nbytes / (us * 1e-6) / 1e12, 3),
            }
        )
    return {"T": T, "sequences": len(LENGTHS), "bytes": nbytes, "rows": rows}


def main() -> None:
    out = Path(sys.argv[1])
    prefill = sys.argv[2:] == ["prefill"]
    g = torch.Generator(device="cuda").manual_seed(0)
    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "default_block_c": DECODE_BC,
        "default_prefill_tile": [BT, BC],
        "copy_TBps": round(copy_tbps(), 3),
    }
    res["cases"] = [prefill_case(g)] if prefill else [case(B, g) for B in (256, 512)]
    for c in res["cases"]:
        for r in c["rows"]:
            r["frac_copy"] = round(r["TBps"] / res["copy_TBps"], 3)
            print(json.dumps(r))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
