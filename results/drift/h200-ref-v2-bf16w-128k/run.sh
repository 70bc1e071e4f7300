#!/usr/bin/env bash
# One H200 call (issues 14 and 15), three independent parts each under its own time limit:
# 1. reference model v2, bf16 weights: the 128k drift study (16 prompts, prefill and decode modes,
#    A/A floor) -> $OUT/ref.tgz;
# 2. MLA prefill attention with fp32 inputs, one layer of a 128k prompt: SDPA vs the Triton kernel
#    (tf32x3) -> $OUT/mla32.json;
# 3. the long-context run end to end, cold (docs built by workers, streamed into the engine) and
#    warm (docs from the cache), 3 repeats each -> $OUT/lc.json.
# Usage on the device (carry .whl): bash results/drift/h200-ref-v2-bf16w-128k/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/r /tmp/m /tmp/lc
timeout 250 python3 scripts/gpu_drift.py --out /tmp/r --parts ref-bf16 --prompts 16 --max-minutes 3.9 \
  --resume 2>&1 | tee "$OUT/ref_log.txt"
(cd /tmp/r && tar czf "$OUT/ref.tgz" .)
timeout 90 python3 scripts/bench_mla_prefill.py --out /tmp/m --parts attention --dtypes fp32 \
  --mla-layers 1 --modes sdpa,triton --repeats 3 --mode-budget-s 40 2>&1 | tee "$OUT/mla_log.txt"
cp /tmp/m/bench_mla_prefill.json "$OUT/mla32.json"
timeout 220 python3 scripts/bench_long_context_run.py --out /tmp/lc --modes cold,warm --repeats 3 \
  2>&1 | tee "$OUT/lc_log.txt"
cp /tmp/lc/bench_long_context_run.json "$OUT/lc.json"
du -sh "$OUT"/*
