#!/usr/bin/env bash
# One device step (H200 or H100), issue 42 goal 1: the KDA decode step's persistent builds (DecodeTile.persist:
# a fixed grid of programs per SM, each loading its next tile's state before updating the current
# one) against the default tile, for fp32 / fp16 / bf16 pools at B = 128 and 512, three interleaved
# rounds (median and range), with the copy bandwidth measured in the same process.
# Usage (device, repository root, carrying .whl): bash results/bench/decode-persist/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${DECODE_S:-220} python3 scripts/bench_kernels.py --out "$OUT" --sweep persist --sweep-repeats 3 \
  --sweep-budget-s ${SWEEP_S:-150} \
  --skip correctness,decode,prefill,twin,prefill_detail > "$OUT/log.txt" 2>&1
echo "bench_kernels exit $?"
grep -E "best|fp16 / fp32|stopped" "$OUT/bench_kernels.md" | head -n 20
