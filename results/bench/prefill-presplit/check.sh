#!/usr/bin/env bash
# One device call after the presplit sweep (issue 42 goal 2): bits_check.py (the candidate tiles
# against the defaults, bit for bit, over varied shapes, inputs, pools).
# Usage (device, repository root, carrying .whl): TILES='{"scan": [32, 4, 2, false], "presplit": [true]}'
#   bash results/bench/prefill-presplit/check.sh OUT
set -u
OUT=${1:?usage: check.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout 200 python3 results/bench/prefill-presplit/bits_check.py "$TILES" > "$OUT/bits_check.json" 2> "$OUT/bits_check.err"
echo "bits_check exit $?: $(head -c 600 "$OUT/bits_check.json")"
nvidia-smi --query-gpu=name --format=csv,noheader
