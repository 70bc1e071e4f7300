#!/usr/bin/env bash
# The second H200 call of session 35 for issue 15, with the wide bf16 scan tile (64, 4, 3) taken
# by `scan_tile`'s rule (3/4 of the SMs), each part under its own limit:
# 1. bench_prefill: scan_width (the rule's switch again), lengths 8k/32k/128k, the varlen batch,
#    per-kernel times -> $OUT/prefill.{json,md,log};
# 2. the 1,319-prompt GSM8K-shaped workload once per state arm, every prompt (--keep-prompts;
#    each finished arm also lands in arms_progress.jsonl) -> $OUT/engine.{json,md,log}.
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call17/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 230 python3 scripts/bench_prefill.py --out /tmp/p --parts scan_width,lengths,varlen,kernels \
  --budget-s 200 > "$OUT/prefill.log" 2>&1
cp /tmp/p/bench_prefill.json "$OUT/prefill.json"; cp /tmp/p/bench_prefill.md "$OUT/prefill.md"
tail -n 40 "$OUT/prefill.md"
mkdir -p /tmp/e
( while true; do cp /tmp/e/arms_progress.jsonl "$OUT/" 2>/dev/null; sleep 5; done ) > /dev/null 2>&1 &
COPIER=$!
timeout 340 python3 scripts/bench_engine.py --out /tmp/e --parts arms --budget-s 335 --reserve-s 0 \
  --keep-prompts > "$OUT/engine.log" 2>&1
kill $COPIER
cp /tmp/e/arms_progress.jsonl "$OUT/" 2>/dev/null
cp /tmp/e/bench_engine.json "$OUT/engine.json"; cp /tmp/e/bench_engine.md "$OUT/engine.md"
grep -v "generate:" "$OUT/engine.log" | tail -n 12
