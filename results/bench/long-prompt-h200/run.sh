#!/usr/bin/env bash
# One device call (H200), issue 42 goal 3: a 128k-token prompt at 48B dims as `evalkit run` runs it
# (fp32 state stored every 2,048 tokens, the default 16,384-token batch-invariant forwards): several
# store chunks per forward (the default) against one per forward, and the 16k-store-point arm; the
# first two must agree to the last bit (scripts/bench_long_prompt.py). Then, with the time left, the
# split SSD prefill against the walk kernel and FLA (issue 41; results/ssd-prefill-split/run.sh).
# Usage (device, repository root, carrying .whl): bash results/bench/long-prompt-h200/run.sh OUT
# (ROWS=pieces,... picks rows; CALL_S=0 skips the split part)
set -u
OUT=${1:?usage: run.sh OUT}
start=$(date +%s)
source scripts/device_setup.sh
mkdir -p "$OUT/long-prompt"
timeout ${LONG_S:-330} python3 scripts/bench_long_prompt.py --out "$OUT/long-prompt" \
  --rows "${ROWS:-pieces,chunk per forward,16k store points}" > "$OUT/long-prompt/log.txt" 2>&1
echo "bench_long_prompt exit $? after $(( $(date +%s) - start )) s"
tail -n 4 "$OUT/long-prompt/log.txt"
left=$(( ${CALL_S:-570} - ($(date +%s) - start) ))
if [ "$left" -gt 120 ]; then
  BUDGET_S=$(( left - 30 )) bash results/ssd-prefill-split/run.sh "$OUT/split"
fi
nvidia-smi --query-gpu=name --format=csv,noheader
echo "end after $(( $(date +%s) - start )) s"
