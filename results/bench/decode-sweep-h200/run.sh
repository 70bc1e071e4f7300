#!/usr/bin/env bash
# One H200 call for issue 15, most wanted part first (each under its own limit; what a part wrote
# under $OUT comes back even if a later one is cut):
# 1. the decode tile sweep (DecodeTile's build options at B=128 and 512 per pool) -> $OUT/k/, k_log.txt;
# 2. transformers + FLA at batch 256 and 512, 16 new tokens (batch 128 was the fastest measured
#    before; the sweep stops at the first batch that runs out of memory) -> $OUT/hf/, hf_log.txt;
# 3. the long-context run cold x3 with the doc workers at niceness +10 -> $OUT/lc.json, lc_log.txt.
# Usage on the device (carry .whl): bash results/bench/decode-sweep-h200/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 130 python3 scripts/bench_kernels.py --out "$OUT/k" --skip correctness,decode,prefill,twin,prefill_detail \
  2>&1 | tee "$OUT/k_log.txt"
timeout 215 python3 scripts/bench_engine.py --out "$OUT/hf" --parts transformers --hf-batches 256,512 \
  --hf-new-tokens 16 --budget-s 205 2>&1 | tee "$OUT/hf_log.txt"
timeout 100 python3 scripts/bench_long_context_run.py --out /tmp/lc --modes cold --repeats 3 2>&1 | tee "$OUT/lc_log.txt"
cp /tmp/lc/bench_long_context_run.json "$OUT/lc.json"
