#!/usr/bin/env bash
# One device call (issue 41): which change moved the last bits between the H200 drift study
# (per-token SSD launches) and the H100 one (one launch per block) — the same 16-prompt study with
# --no-fused-decode (per-token launches) on the H100, cut by its budget after the first decode prompt.
# Device (repository root, carrying .whl): bash results/reference-model-mamba2/drift-32k-h100/per-token-check/run.sh
source scripts/device_setup.sh >/dev/null
mkdir -p "$OUT"
timeout 170 python3 scripts/gpu_drift.py --out /tmp/pt --parts ref-fp32 --ref-model models/reference-model-mamba2 \
  --prompts 16 --ref-length 32768 --max-minutes 2.1 --no-fused-decode > "$OUT/log.txt" 2>&1
echo "rc $?"; tail -3 "$OUT/log.txt"
cp /tmp/pt/runs/*/prompt_results.csv "$OUT/"
nvidia-smi --query-gpu=name --format=csv,noheader
