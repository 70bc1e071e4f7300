#!/usr/bin/env bash
# One device step (H100: the 48B model's 91.5 GiB of weights do not fit, so its first 12 layers,
# 9 KDA + 3 MLA): issue 42 goal 3's engine workload, 1,319 GSM8K-shaped prompts x 256 generated
# tokens, every arm, against the anchors' floor scaled to 12 layers and to this GPU's GEMM and copy
# rates measured in the same process (evalkit/bench/engine_floor.py). Not the goal's figure (27 layers
# on an H200): a partial model on another device.
# Usage (device, repository root, carrying .whl): bash results/bench/engine-h100-12layers/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
start=$(date +%s)
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${ENG_S:-450} python3 scripts/bench_engine.py --out "$OUT" --layers ${LAYERS:-12} --parts arms \
  --budget-s 430 --reserve-s 0 --keep-prompts > "$OUT/log.txt" 2>&1
echo "bench_engine exit $? after $(( $(date +%s) - start )) s"
grep -E "device floor|arm .*wall" "$OUT/log.txt" | cut -c1-400
nvidia-smi --query-gpu=name --format=csv,noheader
