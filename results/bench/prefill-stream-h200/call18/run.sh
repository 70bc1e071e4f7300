#!/usr/bin/env bash
# The third H200 call of session 35 for issue 15: the wide bf16 scan tile (64, 4, 3) was 0.965x
# the default's time on one 32k sequence too (call17), so scan_width now also times one sequence
# of 8k and 128k, with FLA beside each batch; then the per-kernel times (cut by the budget in
# call17) -> $OUT/prefill.{json,md,log}.
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call18/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 280 python3 scripts/bench_prefill.py --out /tmp/p --parts scan_width,kernels --budget-s 270 \
  > "$OUT/prefill.log" 2>&1
cp /tmp/p/bench_prefill.json "$OUT/prefill.json"; cp /tmp/p/bench_prefill.md "$OUT/prefill.md"
tail -n 30 "$OUT/prefill.md"
