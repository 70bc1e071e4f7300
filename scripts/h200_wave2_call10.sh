#!/usr/bin/env bash
# A prepared H200 call for issue 15 (written in session 35, not yet run): the decode sweep with
# the one-warp tiles (32x1, 16x1: sums over K by shuffles, no shared-memory round trips), the
# 16-bit pools' 64-72% of copy bandwidth being the goal furthest off (85%) -> $OUT/k/.
# Usage on the device (carry .whl): bash scripts/h200_wave2_call10.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 400 python3 scripts/bench_kernels.py --out "$OUT/k" --skip correctness,decode,prefill,twin,prefill_detail \
  2>&1 | tail -n 40
