"""Offline (no GPU; Triton's own ptxas): instructions per thread and registers of the KDA decode
kernel's sm_90 builds, for decode-persist/README.md's reading of the two devices' times.
Usage (repository root):
  python results/bench/decode-persist/instruction_counts.py > /tmp/c.txt
  && mv /tmp/c.txt results/bench/decode-persist/instruction_counts.txt"""

import collections
import os
import re
import subprocess

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
from evalkit.kernels import compile_check as cc  # noqa: E402
from evalkit.kernels.kda_decode.wrapper import DECODE_TILES, DecodeTile  # noqa: E402

def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


commit, dirty = git("rev-parse", "--short", "HEAD"), bool(git("status", "--porcelain"))
print(f"commit {commit}, {'dirty' if dirty else 'clean'} tree; sm_90 builds, H = 32, K = V = 128, bf16 model")
print("pool | tile | instructions per thread | conversions (cvt) | registers | programs per SM by registers")
for pool, tile in (("fp32", DECODE_TILES["fp32"]), ("fp16", DECODE_TILES["fp16"]),
                   ("fp16", DecodeTile(32, 4, even=True, v_inner=True, early=True))):  # fmt: skip
    build = cc.decode_tile_build(pool, tile)
    ops = collections.Counter()
    for line in build.ptx.splitlines():
        m = re.match(r"\s*(?:@%p\d+ )?([a-z]\w*)[.\s]", line)
        if m and not line.strip().startswith(("//", ".")):
            ops[m.group(1)] += 1
    regs = build.resources()["registers"]
    per_sm = 65536 // ((regs + 7) // 8 * 8 * tile.num_warps * 32)
    print(f"{pool} | {tile.BV}x{tile.num_warps} | {sum(ops.values())} | {ops['cvt']} | {regs} | {per_sm}")
