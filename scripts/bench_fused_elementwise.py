#!/usr/bin/env python
"""The fused elementwise kernels of the model layers (`evalkit.kernels.rms_norm`, `.swiglu`)
against the plain torch forms they replace, at Kimi-Linear-48B's prefill shapes on the GPU.

    python scripts/bench_fused_elementwise.py --out results/bench/fused-elementwise-h200

Per op and input dtype: `do_bench` medians of --repeats runs of each form, interleaved, the ratio
(torch's time over the kernel's), and the outputs compared: the fraction of elements that differ
and the largest difference in units of the dtype's last place. Shapes: RMSNorm over a 16,384-row
prefill forward at hidden 2304; SwiGLU over its 131,072 routed rows (top 8) at moe_intermediate 1024.
Writes fused_elementwise.json (with the git commit and whether the tree was clean)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
try:
    from evalkit.bench import harness
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(ROOT))
    from evalkit.bench import harness

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest difference between a and b in units of their dtype's last place (at b)."""
    diff = (a.double() - b.double()).abs()
    spacing = torch.finfo(b.dtype).eps * b.double().abs().clamp_min(torch.finfo(b.dtype).tiny)
    return int((diff / spacing).max().round())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    harness.import_checkout()
    import triton

    from evalkit import kernels

    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    res: dict = {"git": harness.git_state(), "device": torch.cuda.get_device_name(), "rows": []}
    for name, dt in DTYPES.items():
        x = (3 * torch.randn(16384, 2304, device=dev, generator=gen)).to(dt)
        w = (1 + 0.1 * torch.randn(2304, device=dev, generator=gen)).to(dt)
        gu = (3 * torch.randn(131072, 2048, device=dev, generator=gen)).to(dt)
        cases = {  # the torch forms (kernels.cpu) run on the GPU tensors as the layers ran them
            "rms_norm": (
                lambda x=x, w=w: kernels.rms_norm(x, w, 1e-5),
                lambda x=x, w=w: kernels.cpu.rms_norm(x, w, 1e-5),
            ),
            "swiglu": (lambda gu=gu: kernels.swiglu(gu), lambda gu=gu: kernels.cpu.swiglu(gu)),
        }
        for op, (fused, plain) in cases.items():
            a, b = fused(), plain()
            runs = {"fused": [], "torch": []}
            for _ in range(args.repeats):
                runs["fused"].append(triton.testing.do_bench(fused, warmup=10, rep=100))
                runs["torch"].append(triton.testing.do_bench(plain, warmup=10, rep=100))
            row = {
                "op": op,
                "dtype": name,
                "fused_ms": statistics.median(runs["fused"]),
                "torch_ms": statistics.median(runs["torch"]),
                "runs": runs,
                "differing_fraction": float((a != b).float().mean()),
                "max_ulps": ulps(a, b),
            }
            row["speedup"] = row["torch_ms"] / row["fused_ms"]
            res["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fused_elementwise.json").write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
