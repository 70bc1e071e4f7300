#!/usr/bin/env bash
# One device call (H100: the 48B model's first 12 layers; H200: all 27): the rows per expert of the
# engine's decode steps (record.py), the MoE decode GEMM timed on the recorded steps beside the
# uniform ones (scripts/bench_moe.py --routing), then the engine's arms with a decode step's dummy
# rows routed to no expert ("after", the committed code) and routed like real rows ("before"),
# alternating (ab.py; ORDER picks the order, ENG_S each run's limit).
# Usage (device, repository root, carrying .whl): bash results/bench/moe-routing/run.sh OUT
set -u -o pipefail
OUT=${1:?usage: run.sh OUT}
HERE=results/bench/moe-routing
mkdir -p "$OUT"
start=$(date +%s)
source scripts/device_setup.sh
layers=27
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || layers=12
if [ "${REC_S:-120}" -gt 0 ]; then
  timeout "${REC_S:-120}" python3 $HERE/record.py "$OUT/routing.json" --layers $layers 2>&1 | grep -v "^generate"
  echo "record exit $? after $(( $(date +%s) - start )) s"
fi
if [ "${MOE_S:-170}" -gt 0 ]; then
  mkdir -p "$OUT/moe"
  timeout "${MOE_S:-170}" python3 scripts/bench_moe.py --out "$OUT/moe" --skip layer --routing "$OUT/routing.json" \
    --budget-s $(( ${MOE_S:-170} - 30 )) > "$OUT/moe/log.txt" 2>&1
  echo "bench_moe exit $? after $(( $(date +%s) - start )) s"
  grep -E "^\| [0-9]" "$OUT/moe/bench_moe.md" | cut -c1-170
fi
for variant in ${ORDER:-before after}; do
  [ "${ENG_S:-100}" -gt 0 ] || break
  dir="$OUT/eng-$variant"
  [ -d "$dir" ] && dir="$dir-2"
  mkdir -p "$dir"
  timeout "${ENG_S:-100}" python3 $HERE/ab.py $variant --out "$dir" --layers $layers --parts arms --arms fp16 \
    --budget-s $(( ${ENG_S:-100} - 20 )) --reserve-s 0 --keep-prompts > "$dir/log.txt" 2>&1
  echo "engine $variant exit $? after $(( $(date +%s) - start )) s"
  grep -E "arm .*wall" "$dir/log.txt" | cut -c1-400
  rm -f "$dir/arms_progress.jsonl" "$dir/bench_engine.md"
done
nvidia-smi --query-gpu=name --format=csv,noheader
echo "end after $(( $(date +%s) - start )) s"
