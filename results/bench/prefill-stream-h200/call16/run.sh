#!/usr/bin/env bash
# The first H200 call of session 35 for issue 15 (after call15: the bf16 scan with BV 64 took the
# varlen batch from 4.42 to 4.04 ms, FLA 3.91), each part under its own limit:
# 1. scan_width: the bf16 form with its "scan" and its "scan_wide" tile forced, on 1-32 equal
#    sequences, the varlen batch and one 16k sequence among short ones (where `scan_tile`'s rule
#    should switch) -> width/;
# 2. the two wide tiles with three stages on the varlen batch, one process each (a tile that
#    faults the GPU takes its process down) -> scan_*/;
# 3. the diag tiles at 32k, both forms, not adopted -> diag/.
# Everything is written under /tmp/o and packed into $OUT/call.tgz at the end (the device returns
# few files).
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call16/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
O=/tmp/o
mkdir -p $O
timeout 110 python3 scripts/bench_prefill.py --out $O/width --parts scan_width --budget-s 100 > $O/width.log 2>&1
for t in "64,8,3,1" "64,4,3,1"; do
  timeout 35 python3 scripts/bench_prefill.py --out "$O/scan_${t//,/_}" --parts sweep_varlen \
    --varlen-scan "$t" --budget-s 30 > "$O/scan_${t//,/_}.log" 2>&1
done
timeout 130 python3 scripts/bench_prefill.py --out $O/diag --parts sweep --sweep-only diag --no-adopt \
  --budget-s 120 > $O/diag.log 2>&1
tail -n 30 $O/width/bench_prefill.md $O/scan_*/bench_prefill.md $O/diag/bench_prefill.md
tar czf "$OUT/call.tgz" -C $O .
