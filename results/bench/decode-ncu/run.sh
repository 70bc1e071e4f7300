#!/usr/bin/env bash
# One device step, issue 42 goal 1: Nsight Compute's counters for the KDA decode step's default
# tiles (fp32 / fp16 / bf16 pools, B = 512): where a 16-bit step's time goes (stall reasons,
# DRAM throughput, occupancy, issue), for the question why it stays at 67-72% of copy bandwidth
# on the H200 while the fp32 step reaches 90-95%. Clocks left alone (--clock-control none).
# Usage (device, repository root, carrying .whl): bash results/bench/decode-ncu/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
 --section Occupancy --section SchedulerStats --section LaunchStats --section InstructionStats"
for pool in ${POOLS:-fp32 fp16 bf16}; do
  timeout 120 ncu --clock-control none --kernel-name regex:kda_decode_kernel --launch-skip 3 \
    --launch-count 1 $SECTIONS --print-details all \
    python3 results/bench/decode-ncu/profile_decode.py $pool ${B:-512} > "$OUT/ncu-$pool.txt" 2>&1
  echo "$pool: ncu exit $?"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
