"""One-off (device): the short conv's decode kernel at the 48B model's KDA dims (q | k | v: 3 x 32
heads x 128 = 12,288 channels of bf16, width 4, read strided out of the fused projection, written as
three groups) for each `block_c` (channels a program convolves; 64 the default), B = 256 (the
engine's decode width) and 512: every output and pool bit against the default's, then CUDA-graph
replay times (`triton.testing.do_bench_cudagraph` medians, rounds interleaved) against a 4 GiB
copy's bandwidth in the same process.

    python3 results/bench/conv-decode/probe.py OUT_JSON"""

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

from evalkit.kernels.short_conv.wrapper import DECODE_BC, causal_conv1d_decode  # noqa: E402

C, W, WIDE = 3 * 32 * 128, 4, 3 * 32 * 128 + 128 + 128 + 32
BLOCKS = (32, 64, 128, 256, 512, 1024)
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


def main() -> None:
    out = Path(sys.argv[1])
    g = torch.Generator(device="cuda").manual_seed(0)
    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "default_block_c": DECODE_BC,
        "copy_TBps": round(copy_tbps(), 3),
    }
    res["cases"] = [case(B, g) for B in (256, 512)]
    for c in res["cases"]:
        for r in c["rows"]:
            r["frac_copy"] = round(r["TBps"] / res["copy_TBps"], 3)
            print(json.dumps(r))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
