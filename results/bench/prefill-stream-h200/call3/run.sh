#!/usr/bin/env bash
# One H200 call for issue 15 with the stream prefill as the default (commit recorded here, not on
# the device, whose git metadata is stale), each part under its own limit:
# 1. bench_prefill.py: the solve tile swept at 32k, then stream / stream_bf16 / FLA chunk_kda at
#    8k, 32k, 128k and a 37-sequence varlen batch, per-kernel times -> $OUT/p/
# 2. bench_engine.py: the fp32 arm of the 1,319-prompt GSM8K-shaped workload at 48B dims, then the
#    batch-invariance check -> $OUT/e/
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call3/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/p" "$OUT/e"
timeout 175 python3 scripts/bench_prefill.py --out "$OUT/p" --parts sweep,lengths,varlen,kernels --budget-s 160 \
  2>&1 | tee "$OUT/p/log.txt" | grep -v -i warn | grep -E "sweep best|lengths|varlen|kernels|ERROR"
timeout 185 python3 scripts/bench_engine.py --out "$OUT/e" --parts arms,invariance --arms fp32 --budget-s 180 \
  --reserve-s 0 2>&1 | tee "$OUT/e/log.txt" | grep -E "arm fp32:|invariance|ERROR|calibration"
