"""One-off (device): scripts/bench_engine.py with every decode step timed twice, by the host clock
around the whole engine step and by CUDA events around the runner's forward (graph replay and the
logits copy), so the step's time off the GPU shows. Variants:
- after: the code as committed;
- before: the engine as it was before this study's changes (`9abed1c`): the runner copies the
  logits out of the graph's buffer, the finite check writes a [B, V] mask, the MoE sorts int64
  ids, the KDA short conv reads a contiguous copy of its input and its q, k, v are copied out of
  its output (emulated: the same bytes copied, the grouped layout the layer now takes), the state
  check gathers, takes |x| in place and reduces, and each sequence that finishes in a decode step
  is checked on its own (a sync each);
- mid: only the last two (the state check) undone: the engine of `e55ac3b`;
- bn128: the committed code with the MoE decode GEMM at 128 output columns a program (the default
  64), after checking that both tiles give the same bits.

    python3 results/bench/engine-step-gap/probe.py after|before|mid|bn128 <bench_engine.py arguments>

Writes step_timing.json beside bench_engine.json (in --out)."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_engine  # noqa: E402

bench_engine.bootstrap_evalkit()
import torch  # noqa: E402

from evalkit.engine import llm_engine  # noqa: E402
from evalkit.engine.llm_engine import LLMEngine  # noqa: E402
from evalkit.engine.model_runner import ModelRunner  # noqa: E402
from evalkit.engine.state import StatePools  # noqa: E402
from evalkit.kernels.moe_gemm import wrapper as moe_wrapper  # noqa: E402
from evalkit.model.layers import moe  # noqa: E402

variant = sys.argv[1]
if variant not in ("after", "before", "mid", "bn128"):
    sys.exit("usage: probe.py after|before|mid|bn128 <bench_engine.py arguments>")
out_dir = Path(sys.argv[sys.argv.index("--out") + 1])
steps: list[dict] = []


def same_bits_bn128() -> dict:
    """Both tiles on a 512-sequence decode step's rows at the 48B model's MoE dims (bf16)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    res = {}
    for name, (n, k) in {"gate_up": (2048, 2304), "down": (2304, 1024)}.items():
        E, rows = 256, 512 * 8
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(E, n, k, device="cuda", dtype=torch.bfloat16, generator=g) * k**-0.5
        counts = torch.bincount(torch.randint(0, E, (rows,), device="cuda", generator=g), minlength=E)
        offs = counts.cumsum(0).to(torch.int32)
        a = moe_wrapper.moe_gemm(x, w, offs, moe_wrapper.MoeTile(BN=64))
        b = moe_wrapper.moe_gemm(x, w, offs, moe_wrapper.MoeTile(BN=128))
        res[name] = {"equal": bool(torch.equal(a, b)), "differing": int((a != b).sum())}
    return res


if variant == "bn128":
    check = same_bits_bn128()
    print(f"probe: BN 64 vs 128 bits: {check}", flush=True)
    (out_dir / "bn128_bits.json").parent.mkdir(parents=True, exist_ok=True)
    (out_dir / "bn128_bits.json").write_text(json.dumps(check, indent=1))
    moe_wrapper.DEFAULT_TILE = moe_wrapper.MoeTile(BN=128)

if variant == "before":
    from evalkit import kernels
    from evalkit.kernels.short_conv.layout import grouped

    llm_engine.nonfinite_rows = lambda logits: ~torch.isfinite(logits).all(-1)
    moe.expert_order = lambda flat, E: torch.sort(flat, stable=True)[1]
    conv_prefill, conv_decode = kernels.causal_conv1d_prefill, kernels.causal_conv1d_decode
    kernels.causal_conv1d_prefill = lambda x, *a, groups=1, **kw: grouped(
        conv_prefill(x.contiguous(), *a, **kw), groups
    )
    kernels.causal_conv1d_decode = lambda x, *a, groups=1, **kw: grouped(
        conv_decode(x.contiguous(), *a, **kw), groups
    )

if variant in ("before", "mid"):

    def gathered_layer_max_abs(self, slots):
        out = torch.zeros(len(self.kda), slots.numel(), device=self.device)
        for row, t in enumerate(self.kda.values()):
            for i in range(0, slots.numel(), 32):
                part = t.index_select(0, slots[i : i + 32])
                if part.element_size() == 1:
                    part = part.float()
                out[row, i : i + 32] = part.abs_().amax(dim=(1, 2, 3)).float()
        return out

    check_state = LLMEngine._check_state

    def check_each_finished(self, seqs):
        """The sequences that finished in a decode step (every one has a finish reason: the prefill's
        and the periodic checks run before any) checked one at a time."""
        if seqs and all(s.finish_reason for s in seqs):
            for s in seqs:
                check_state(self, [s])
        else:
            check_state(self, seqs)

    StatePools.layer_max_abs = gathered_layer_max_abs
    LLMEngine._check_state = check_each_finished

runner_decode = ModelRunner.decode
engine_decode_step = LLMEngine._decode_step


def timed_runner_decode(self, seqs, copy_logits=True):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    e0.record()
    out = runner_decode(self, seqs, copy_logits or variant == "before")
    e1.record()
    steps.append({"rows": len(seqs), "events": (e0, e1), "runner_host_ms": 1000 * (time.perf_counter() - t)})
    return out


def timed_decode_step(self, seqs):
    t = time.perf_counter()
    out = engine_decode_step(self, seqs)
    steps[-1]["step_ms"] = 1000 * (time.perf_counter() - t)
    return out


timed_engine_row = bench_engine.harness.timed_engine_row


def fresh_timed_row(*args, **kwargs):
    steps.clear()  # keep the last timed run's steps only (calibration runs first, then the arm)
    return timed_engine_row(*args, **kwargs)


ModelRunner.decode = timed_runner_decode
LLMEngine._decode_step = timed_decode_step
bench_engine.harness.timed_engine_row = fresh_timed_row
sys.argv = [bench_engine.__file__, *sys.argv[2:]]
rc = bench_engine.main()
torch.cuda.synchronize()
rows = []
for s in steps:
    e0, e1 = s.pop("events")
    rows.append(s | {"gpu_ms": e0.elapsed_time(e1)})
timed = rows


def summary(sel: list[dict]) -> dict:
    if not sel:
        return {}
    med = {k: round(statistics.median(r[k] for r in sel), 3) for k in ("step_ms", "gpu_ms", "runner_host_ms")}
    gap = [r["step_ms"] - r["gpu_ms"] for r in sel]
    return {
        "steps": len(sel),
        **med,
        "off_gpu_ms_median": round(statistics.median(gap), 3),
        "off_gpu_s_total": round(sum(gap) / 1000, 3),
        "step_s_total": round(sum(r["step_ms"] for r in sel) / 1000, 3),
    }


full = [r for r in timed if r["rows"] == max(x["rows"] for x in timed)]
report = {
    "variant": variant,
    "timed": summary(timed),
    "full_batch": summary(full),
    "partial_batch": summary([r for r in timed if r not in full]),
    "steps": [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in timed],
}
(out_dir / "step_timing.json").write_text(json.dumps(report, indent=1))
print("probe:", json.dumps({k: report[k] for k in ("timed", "full_batch", "partial_batch")}), flush=True)
sys.exit(rc)
