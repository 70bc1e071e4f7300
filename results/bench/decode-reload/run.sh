#!/usr/bin/env bash
# One device step (H200 or H100), issue 42 goal 1: the KDA decode step's re-reading builds
# (DecodeTile.reload: the state tile read again for the update instead of held widened across the
# first sum over K) against the default tile, fp32 / fp16 / bf16 pools, B = 128 and 512, three
# interleaved rounds (median and range), copy bandwidth in the same process; the compiled re-reading
# builds against the holding ones bit for bit (bits_check.py); then Nsight Compute's counters for
# the re-reading 64x4 / 128x4 fp16 builds at B = 512 (occupancy, stalls). NCU=0 skips those;
# SKIP=... names the bench sections to skip (default: all but the sweep).
# Usage (device, repository root, carrying .whl): bash results/bench/decode-reload/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${DECODE_S:-240} python3 scripts/bench_kernels.py --out "$OUT" --sweep reload --sweep-repeats 3 \
  --sweep-budget-s ${SWEEP_S:-170} \
  --skip ${SKIP:-correctness,decode,prefill,twin,prefill_detail} > "$OUT/log.txt" 2>&1
echo "bench_kernels exit $?"
grep -E "best|fp16 / fp32|stopped" "$OUT/bench_kernels.md" | head -n 20
timeout 120 python3 results/bench/decode-reload/bits_check.py > "$OUT/bits_check.json" 2> "$OUT/bits_check.err"
echo "bits_check exit $?: $(head -c 200 "$OUT/bits_check.json")"
if [ "${NCU:-1}" = 1 ]; then
  SECTIONS="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats"
  for spec in "fp16 (64,4,4,True,'',True,True,0,True)" "fp16 (128,4,4,True,'',True,True,0,True)"; do
    set -- $spec
    timeout 60 ncu --clock-control none --kernel-name regex:kda_decode_kernel --launch-skip 3 --launch-count 1 \
      $SECTIONS python3 results/bench/decode-ncu/profile_decode.py $1 512 "$2" >> "$OUT/ncu-reload.txt" 2>&1
    echo "ncu $spec exit $?"
  done
fi
nvidia-smi --query-gpu=name --format=csv,noheader
