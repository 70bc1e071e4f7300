#!/usr/bin/env bash
# The third H200 call of session 36 for issue 15: the MLA prefill's new 16-bit tile (128, 64, 8, 3)
# against a fourth stage (212,992 bytes of shared memory, no spills), then a whole 125k prompt at
# Kimi-Linear-48B dims with it (goal <= 5 s; 5.65 s with two stages) -> $OUT/m.tgz.
# Usage on the device (carry .whl): bash results/bench/mla-prefill-triton-h200/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/m
timeout 120 python3 scripts/bench_mla_prefill.py --out /tmp/m/a --parts attention --dtypes bf16 --modes triton \
  --tiles "bf16:128,64,8,2;128,64,8,4" --repeats 3 --mode-budget-s 10 > /tmp/m/attention.log 2>&1
tail -n 5 /tmp/m/attention.log
timeout 150 python3 scripts/bench_mla_prefill.py --out /tmp/m/e --parts engine --modes triton --repeats 3 \
  --mode-budget-s 30 > /tmp/m/engine.log 2>&1
tail -n 4 /tmp/m/engine.log
tar czf "$OUT/m.tgz" -C /tmp m
