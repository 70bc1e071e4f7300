#!/usr/bin/env bash
# One device call (H200 or H100): the short conv's decode kernel per channel block (probe.py: bits
# against the default block, CUDA-graph times, copy bandwidth), then the engine's kernel profile of
# the 48B model (`scripts/bench_engine.py --parts profile`: one prefill forward, decode steps at
# 512; all 27 layers on an H200, the first 12 elsewhere: the weights fit no H100).
# Usage (device, repository root, carrying .whl): bash results/bench/conv-decode/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p "$OUT/profile"
s=$(date +%s)
timeout 120 python3 results/bench/conv-decode/probe.py "$OUT/conv/probe.json" > "$OUT/conv-log.txt" 2>&1
echo "probe exit $? after $(( $(date +%s) - s )) s"; cat "$OUT/conv-log.txt" | cut -c1-300
layers=27
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || layers=12
timeout 220 python3 scripts/bench_engine.py --out "$OUT/profile" --layers $layers --parts profile --budget-s 200 \
  > "$OUT/profile/log.txt" 2>&1
echo "profile exit $? after $(( $(date +%s) - s )) s"
grep -E "profile (prefill|decode)" "$OUT/profile/log.txt" | cut -c1-1500
