#!/usr/bin/env bash
# One H200 call for issue 15 with the fused MoE combine now the default, each part under its own
# limit (what a part wrote under $OUT comes back if a later one is cut):
# 1. a whole 128k prompt at 48B dims, Triton MLA prefill + fused KDA prefill (the fastest
#    configuration measured, 7.43 s before) -> $OUT/mla_engine.json, mla_log.txt;
# 2. the 1,319-prompt GSM8K-shaped workload once per state arm (default kernels: the swept decode
#    tile, the fused MoE combine), then the batch-invariance check -> $OUT/arms/, arms_log.txt.
# Usage on the device (carry .whl): bash results/bench/engine-h200-arms-1319-fused-combine/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
EVALKIT_MLA_PREFILL=triton EVALKIT_KDA_PREFILL=fused timeout 75 python3 scripts/bench_mla_prefill.py \
  --out /tmp/me --parts engine --modes triton --repeats 3 --mode-budget-s 25 2>&1 | tee "$OUT/mla_log.txt"
cp /tmp/me/bench_mla_prefill.json "$OUT/mla_engine.json"
timeout 420 python3 scripts/bench_engine.py --out "$OUT/arms" --parts arms,invariance --budget-s 2000 \
  --reserve-s 0 2>&1 | tee "$OUT/arms_log.txt"
ls -la "$OUT" "$OUT/arms"
