#!/usr/bin/env bash
# One H200 call for issue 15 (the "Not measured yet" list of results/bench/README.md), each part
# under its own limit so what a part wrote under $OUT comes back if a later one is cut:
# 1. where the arms' GPU time goes, with EVALKIT_MOE_COMBINE=torch (the default when this ran) and
#    =fused (the default since) -> $OUT/prof_default.json, $OUT/prof_fused.json, prof_log.txt;
# 2. the long-context run cold and warm x3 with one full-size tokenization per doc -> $OUT/lc.json.
# Usage on the device (carry .whl): bash results/bench/moe-combine-h200/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
EVALKIT_MOE_COMBINE=torch timeout 80 python3 scripts/bench_engine.py --out /tmp/pd --parts profile --budget-s 70 2>&1 | tee "$OUT/prof_log.txt"
cp /tmp/pd/bench_engine.json "$OUT/prof_default.json"
EVALKIT_MOE_COMBINE=fused timeout 80 python3 scripts/bench_engine.py --out /tmp/pf --parts profile \
  --budget-s 70 2>&1 | tee -a "$OUT/prof_log.txt"
cp /tmp/pf/bench_engine.json "$OUT/prof_fused.json"
timeout 200 python3 scripts/bench_long_context_run.py --out /tmp/lc --modes cold,warm --repeats 3 2>&1 | tee "$OUT/lc_log.txt"
cp /tmp/lc/bench_long_context_run.json "$OUT/lc.json"
ls -la "$OUT"
