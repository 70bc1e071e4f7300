#!/usr/bin/env bash
# One device call (H100: the 48B model's first 12 layers; H200: all 27): the engine's fp16 arm on
# 1,319 prompts with every decode step timed on the host and by CUDA events (probe.py), alternating
# the committed code ("after"), the engine before this study's changes ("before"), before its
# state-check changes only ("mid") and the MoE decode GEMM at 128 columns ("bn128"); ORDER picks the
# runs and their order (call 1 ran "before after bn128 after before"), ENG_S each run's limit.
# Usage (device, repository root, carrying .whl): bash results/bench/engine-step-gap/run.sh OUT
set -u -o pipefail
OUT=${1:?usage: run.sh OUT}
HERE=results/bench/engine-step-gap
mkdir -p "$OUT"
start=$(date +%s)
source scripts/device_setup.sh
layers=27
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || layers=12
for variant in ${ORDER:-before after bn128 after before}; do
  dir="$OUT/$variant"
  [ -d "$dir" ] && dir="$dir-2"
  mkdir -p "$dir"
  timeout "${ENG_S:-100}" python3 $HERE/probe.py $variant --out "$dir" --layers $layers --parts arms --arms fp16 \
    --budget-s $(( ${ENG_S:-100} - 20 )) --reserve-s 0 --keep-prompts > "$dir/log.txt" 2>&1
  echo "$variant exit $? after $(( $(date +%s) - start )) s"
  grep -E "arm .*wall|^probe" "$dir/log.txt" | cut -c1-600
  rm -f "$dir/arms_progress.jsonl" "$dir/bench_engine.md"
done
nvidia-smi --query-gpu=name --format=csv,noheader
echo "end after $(( $(date +%s) - start )) s"
