#!/usr/bin/env bash
# One device call after the defaults changed (issue 42 goal 2): bits_check.py (the new fp32 prefill
# defaults against the build before, bit for bit, over varied shapes, inputs, pools) and
# bench_prefill.py's check part (every case against the float64 reference on the GPU).
# Usage (device, repository root, carrying .whl): bash results/bench/prefill-split/check.sh OUT
set -u
OUT=${1:?usage: check.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout 200 python3 results/bench/prefill-split/bits_check.py > "$OUT/bits_check.json" 2> "$OUT/bits_check.err"
echo "bits_check exit $?: $(head -c 300 "$OUT/bits_check.json")"
timeout 200 python3 scripts/bench_prefill.py --out /tmp/check --parts check > "$OUT/check.log" 2>&1
echo "bench_prefill check exit $?"
cp /tmp/check/bench_prefill.json "$OUT/check.json"
grep -iE "check|error|fail" /tmp/check/bench_prefill.md | head -n 20
nvidia-smi --query-gpu=name --format=csv,noheader
