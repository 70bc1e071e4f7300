#!/usr/bin/env bash
# One H200 call for issue 15 after the stream variant's gate cumsum was split over column blocks and
# its diagonal blocks computed BR rows per program (commit recorded in the results' README; the
# device's git metadata is stale), each part under its own limit:
# 1. bench_prefill.py: GPU check against float64, the prep / diag / solve tiles swept at 32k, then
#    stream / stream_bf16 / FLA chunk_kda at 8k, 32k, 128k and a varlen batch, per-kernel times
#    -> $OUT/p/
# 2. a whole 128k prompt at 48B dims (Triton MLA prefill, stream KDA prefill) -> $OUT/mla/
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call4/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/p" "$OUT/mla"
timeout 290 python3 scripts/bench_prefill.py --out "$OUT/p" --parts check,sweep,lengths,varlen,kernels \
  --budget-s 270 2>&1 | tee "$OUT/p/log.txt" | grep -v -i warn | grep -E "check|sweep|lengths|varlen|kernels|ERROR"
EVALKIT_MLA_PREFILL=triton timeout 80 python3 scripts/bench_mla_prefill.py --out "$OUT/mla" --parts engine \
  --modes triton --repeats 3 --mode-budget-s 25 2>&1 | tee "$OUT/mla/log.txt" | tail -5
