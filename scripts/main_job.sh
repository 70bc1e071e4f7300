#!/usr/bin/env bash
# The README's main job (evalkit run --arm fp16, --arm fp32, compare) and its numerics floor, with wall times, its output
# kept under OUT_DIR (default results/main-job-cpu): run directories, console output, timings.
# Usage: bash scripts/main_job.sh [OUT_DIR]   (from the repository root, evalkit installed)
# WORKERS (default: auto, the README's `--data-parallel auto`: one engine process per CPU core, each
# with one torch thread, or one per GPU); the engine is batch-invariant, so the samples equal a
# one-process run's.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=$(realpath -m "${1:-results/main-job-cpu}")
WORKERS=${WORKERS:-auto}
mkdir -p "$OUT_DIR" && rm -rf "$OUT_DIR/runs"  # keeps what else the folder holds (notes, floor studies)
cd "$OUT_DIR"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" > timings.txt
for arm in fp16 fp32; do
  start=$(date +%s.%N)
  evalkit run --arm "$arm" --data-parallel "$WORKERS" --no-progress > "run-$arm.txt"
  printf 'evalkit run --arm %s --data-parallel %s: %.1f s wall\n' "$arm" "$WORKERS" \
    "$(echo "$(date +%s.%N) - $start" | bc)" >> timings.txt
done
# the numerics floor: the fp32 arm with its prefill cut at other points (an fp32 state is stored
# exactly wherever it is stored, so only the arithmetic around it moves); compare sets the fp16
# state's changed answers and departing generations against the floor's
start=$(date +%s.%N)
evalkit run --arm fp32@chunk=1536 --data-parallel "$WORKERS" --no-progress --out runs/reference-fp32-floor > run-fp32-floor.txt
printf 'evalkit run --arm fp32@chunk=1536 --data-parallel %s: %.1f s wall\n' "$WORKERS" \
  "$(echo "$(date +%s.%N) - $start" | bc)" >> timings.txt
evalkit compare runs/reference-fp32 runs/reference-fp16 --floor runs/reference-fp32-floor > compare.md
# what the suite can resolve: questions for 80% power (NI at 5 pp, a 10 pp loss) from this pilot
evalkit plan runs/reference-fp32 runs/reference-fp16 --margin 0.05 --effect 0.10 > plan.md
{ echo "machine: $(nproc) CPU cores, $(python3 -c 'import platform; print(platform.processor() or platform.machine())')"
  echo "engine processes: $WORKERS"
  echo "evalkit commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "tree: $(git -C "$REPO" status --porcelain 2>/dev/null | grep -v ' results/main-job-cpu' | wc -l) changed files outside this folder"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> timings.txt
cat timings.txt
