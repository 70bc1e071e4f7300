#!/usr/bin/env bash
# One device step (H100 or H200): the fp32-twin check over every state format on the GPU with the
# KDA decode's re-reading default tile (DecodeTile.reload), with its self-test (a truncating build
# that every launch must fail). Usage (device, repository root, carrying .whl):
#   bash results/gpu-twin-reload-h100/run.sh OUT    (LAUNCHES=n, default 300)
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
start=$(date +%s)
timeout ${VERIFY_S:-280} python3 -m evalkit verify-kernels --device cuda --self-test --launches ${LAUNCHES:-300} \
  --json "$OUT/verify.json" > "$OUT/verify.txt" 2>&1
echo "verify-kernels exit $? after $(( $(date +%s) - start )) s"
tail -n 5 "$OUT/verify.txt"
nvidia-smi --query-gpu=name --format=csv,noheader
