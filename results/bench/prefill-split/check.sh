#!/usr/bin/env bash
# One device call after the defaults changed (issue 42 goal 2): bits_check.py (the new fp32 prefill
# defaults against the build before, bit for bit, over varied shapes, inputs, pools), then the wu
# launch's tiles at 32k with one program per column block beside the default (each tile's output
# and state bits compared with the default's; single do_bench medians).
# Usage (device, repository root, carrying .whl): bash results/bench/prefill-split/check.sh OUT
set -u
OUT=${1:?usage: check.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout 110 python3 results/bench/prefill-split/bits_check.py > "$OUT/bits_check.json" 2> "$OUT/bits_check.err"
echo "bits_check exit $?: $(head -c 400 "$OUT/bits_check.json")"
timeout ${SWEEP_S:-100} python3 scripts/bench_prefill.py --out "$OUT/wu" --parts sweep --sweep-only wu \
  --sweep-kinds fp32 --no-adopt > "$OUT/wu-log.txt" 2>&1
echo "bench_prefill wu sweep exit $?"
grep -E "wu" "$OUT/wu/bench_prefill.md" | head -n 5
nvidia-smi --query-gpu=name --format=csv,noheader
