#!/usr/bin/env bash
# One device step (H100: the 48B model's 91.5 GiB of weights do not fit, so its first 12 layers,
# 9 KDA + 3 MLA), issue 42 goal 3's mechanism at the real layer dims: a 128k-token prompt with the
# fp32 state stored every 2,048 tokens, several store chunks per forward (the default) against one
# per forward, and the 16k-store-point arm; the first two must agree to the last bit. Not the goal's
# figure (27 layers on an H200): a partial model on another device.
# Usage (device, repository root, carrying .whl): bash results/bench/long-prompt-h100-12layers/run.sh OUT
# (STATE=fp16: the arms' state format, default fp32; the fp16 run wrote into OUT/fp16)
set -u
OUT=${1:?usage: run.sh OUT}
start=$(date +%s)
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${LONG_S:-300} python3 scripts/bench_long_prompt.py --out "$OUT" --layers 12 --state ${STATE:-fp32} \
  > "$OUT/log.txt" 2>&1
echo "bench_long_prompt exit $? after $(( $(date +%s) - start )) s"
tail -n 4 "$OUT/log.txt"
nvidia-smi --query-gpu=name --format=csv,noheader
