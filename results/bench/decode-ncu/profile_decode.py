"""Launch the KDA decode step a few times for one pool at one batch size, for Nsight Compute to
read the hardware counters of one launch (run.sh beside it). H = 32, K = V = 128, bf16 q/k/v.
Usage (device, repository root): python3 results/bench/decode-ncu/profile_decode.py POOL B [TILE]
TILE: a DecodeTile tuple as Python literal (default: the pool's tile in DECODE_TILES)."""

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_kernels as bk  # noqa: E402
import torch  # noqa: E402

from evalkit.kernels.kda_decode.wrapper import kda_decode  # noqa: E402

pool_name, B = sys.argv[1], int(sys.argv[2])
config = ast.literal_eval(sys.argv[3]) if len(sys.argv) > 3 else None
x, pool, slots = bk.decode_case(B, pool_name)
for _ in range(4):  # compile, warm up; ncu skips the first three launches
    kda_decode(*x.args(), pool, slots, config=config, **bk.store_kw(pool_name, B))
torch.cuda.synchronize()
print("launched", pool_name, B, config)
