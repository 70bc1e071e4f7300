#!/usr/bin/env bash
# The fourth H200 call of session 36 for issue 15: the fused RMSNorm and SwiGLU kernels
# (evalkit.kernels.rms_norm, .swiglu; the torch forms were ~8% and ~5% of a 48B prefill forward's
# GPU time) -> $OUT/{f,pr,l,a}.tgz:
# 1. each kernel against its torch form at 48B prefill shapes (time, differing elements);
# 2. the engine's kernel profile (one prefill forward, one decode step) with them;
# 3. the whole 125k prompt at 48B dims with them and without (EVALKIT_FUSED_ELEMENTWISE=0), same call;
# 4. the 1,319-prompt GSM8K-shaped workload, every arm, every prompt.
# Usage on the device (carry .whl): bash results/bench/fused-elementwise-h200/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 60 python3 scripts/bench_fused_elementwise.py --out /tmp/f > /tmp/f.log 2>&1; mkdir -p /tmp/f; cp /tmp/f.log /tmp/f/
tail -n 4 /tmp/f.log
timeout 90 python3 scripts/bench_engine.py --out /tmp/pr --parts profile --budget-s 80 > /tmp/pr.log 2>&1
mkdir -p /tmp/pr; cp /tmp/pr.log /tmp/pr/log.txt; grep -E "gpu_ms|wall_ms" /tmp/pr/bench_engine.md
mkdir -p /tmp/l
for fused in 1 0; do
  EVALKIT_FUSED_ELEMENTWISE=$fused timeout 70 python3 scripts/bench_mla_prefill.py --out /tmp/l/fused$fused \
    --parts engine --modes triton --repeats 3 --mode-budget-s 30 > /tmp/l/fused$fused.log 2>&1
  tail -n 2 /tmp/l/fused$fused.log
done
timeout 300 python3 scripts/bench_engine.py --out /tmp/a --parts arms --budget-s 290 --reserve-s 0 --keep-prompts \
  > /tmp/a.log 2>&1; mkdir -p /tmp/a; cp /tmp/a.log /tmp/a/log.txt; tail -n 12 /tmp/a/bench_engine.md
for d in f pr l a; do tar czf "$OUT/$d.tgz" -C /tmp "$d"; done
