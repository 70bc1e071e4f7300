"""One-off (device): the rows each expert gets in the engine's decode steps, on the random 48B-dims
model's first N layers (the engine benchmark's H100 proxy), to tell whether the MoE decode GEMM's
~86% of copy bandwidth in the engine (96-98% on bench_moe's uniformly routed rows) comes from
experts with more rows than one block of the tile (32).

    python3 results/bench/moe-routing/record.py OUT.json [--layers 12 --prompts 512 --new-tokens 64]

Runs the engine eagerly (no CUDA graphs: the counts are read back every layer) with the arms' batch
limit and prompts (scripts/bench_engine.py), records every decode step's rows per expert of every
MoE layer (the real rows: a step's dummy rows are routed to no expert), and summarises the full-batch steps: the largest count, the share of rows in experts
over 32 rows, and the times a used expert's weights are read by a 16-, 32- and 64-row block.
The records are what `scripts/bench_moe.py --routing OUT.json` times the GEMMs on."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import torch  # noqa: E402

import bench_engine  # noqa: E402
import bench_moe  # noqa: E402
from evalkit.engine import LLMEngine, SamplingParams  # noqa: E402
from evalkit.model.layers.moe import MoE  # noqa: E402


def summary(counts_list: list[list[int]]) -> dict:
    rows = sum(counts_list[0])
    over = [sum(c for c in cs if c > 32) / rows for cs in counts_list]
    out = {
        "steps": len(counts_list),
        "rows_per_step": rows,
        "max_count_median": statistics.median(max(cs) for cs in counts_list),
        "max_count_max": max(max(cs) for cs in counts_list),
        "experts_used_median": statistics.median(sum(c > 0 for c in cs) for cs in counts_list),
        "share_rows_over_32_median": round(statistics.median(over), 4),
    }
    for bm in (16, 32, 64):
        reads = [bench_moe.row_blocks_per_expert(cs, bm) for cs in counts_list]
        out[f"reads_per_expert_bm{bm}_median"] = round(statistics.median(reads), 3)
        out[f"reads_per_expert_bm{bm}_max"] = round(max(reads), 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--prompts", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--arch", choices=["real", "tiny"], default="real", help="tiny: a CPU check of the script")
    a = ap.parse_args()
    args = argparse.Namespace(arch=a.arch, layers=a.layers, max_seqs=512, decode_width=512, kernels="",
                              prefill_tokens=16384, prefill_chunk=2048)  # fmt: skip
    dev = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    loaded, info = bench_engine.build_model(args, dev)
    moes = [m for m in loaded.model.modules() if isinstance(m, MoE)]
    layer_of = {id(m): i for i, m in enumerate(moes)}
    records: list[dict] = []
    step = {"n": 0}
    original = MoE.forward

    def recording(self, x, n_routed=None, decode=False, real_rows=None):
        if decode:  # the router again (eager, deterministic): its choice for the real rows
            idx = self.route(x)[0][: x.shape[0] if n_routed is None else n_routed]
            real = idx[real_rows] if real_rows is not None else idx
            counts = torch.bincount(real.reshape(-1), minlength=self.E).tolist()
            records.append({"layer": layer_of[id(self)], "step": step["n"] // len(moes), "counts": counts,
                            "dummy_rows": int(idx.shape[0] - real.shape[0])})  # fmt: skip
            step["n"] += 1
        return original(self, x, n_routed, decode, real_rows)

    prompts = bench_engine.make_prompts(a.prompts, loaded.arch.vocab_size, 900, seed=0)
    kw = bench_engine.engine_kwargs(args, dev, max(len(p) for p in prompts) + a.new_tokens + 8)
    engine = LLMEngine(loaded, state_dtype="fp16", enforce_eager=True, **kw)
    MoE.forward = recording
    t = time.perf_counter()
    engine.generate(prompts, SamplingParams(max_new_tokens=a.new_tokens, ignore_eos=True), use_tqdm=False)
    wall = time.perf_counter() - t
    MoE.forward = original
    full = max(sum(r["counts"]) for r in records)
    E, k = moes[0].E, moes[0].top_k
    res = {
        "model": info,
        "moe_layers": len(moes),
        "prompts": a.prompts,
        "new_tokens": a.new_tokens,
        "wall_s": round(wall, 1),
        "full_batch": summary([r["counts"] for r in records if sum(r["counts"]) == full]),
        "uniform_same_rows": summary(
            [torch.bincount(torch.rand(full // k, E).topk(k, -1)[1].reshape(-1), minlength=E).tolist()
             for _ in range(64)]  # fmt: skip
        ),
        "records": records,
    }
    Path(a.out).write_text(json.dumps(res))
    print(json.dumps({k: v for k, v in res.items() if k != "records"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
