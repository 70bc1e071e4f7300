"""Run the stream KDA prefill (fp32 operands, tf32x3 products: the engine's default form) twice on
one sequence of T tokens, for Nsight Compute to read the counters of its launches (run.sh beside
it). H = 32, K = V = 128, bf16 q/k/v, an initial state, as scripts/bench_prefill.py times it.
Usage (device, repository root): python3 results/bench/prefill-ncu/profile_prefill.py [T] [PREC]"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_prefill as bp  # noqa: E402
import torch  # noqa: E402

T = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
prec = sys.argv[2] if len(sys.argv) > 2 else None
run = bp.Problem([T]).ours(variant="stream", dot_precision=prec)
with torch.inference_mode():
    for _ in range(2):  # the first call compiles; ncu's filters pick the launches
        run()
torch.cuda.synchronize()
print("ran the stream prefill", T, prec or "tf32x3")
