#!/usr/bin/env bash
# The reference model's accuracy grid on the H200 (issue 8) with its drift study (issue 7), in one
# device call of ~8 minutes, every part bounded:
#   A. fp32/fp16/bf16 arms in parallel processes: ten retrieval tasks at 2k/8k/32k, then the two
#      the model does at 32k (passkey, niah_single_1) at 64k and 128k (32x and 64x the longest
#      training length);
#   B. scripts/gpu_drift.py on the reference model (prefill and decode modes to 64k), alongside A.
# Usage on the device: bash results/reference-model-v1/run.sh OUTDIR [LIMIT] [LIMIT_128K]
set -u
OUT_DIR=${1:?usage: results/reference-model-v1/run.sh OUTDIR [LIMIT] [LIMIT_128K]}
LIMIT=${2:-30}
LIMIT_LONG=${3:-24}
mkdir -p "$OUT_DIR"/ref "$OUT_DIR"/drift
export PYTHONUNBUFFERED=1
TASKS=passkey,niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multivalue,niah_multiquery,vt,kv_retrieval
LONG_TASKS=passkey,niah_single_1

timeout 240 python3 scripts/gpu_drift.py --out "$OUT_DIR/drift" --parts ref --max-minutes 3.6 \
  --ref-length 65536 > "$OUT_DIR/drift/log.txt" 2>&1 &
for arm in fp32 fp16 bf16; do
  ( timeout 310 evalkit run --device cuda --arm "$arm" --tasks "$TASKS" --lengths 2k,8k,32k --limit "$LIMIT" \
      --no-progress --out "$OUT_DIR/ref/$arm" > "$OUT_DIR/ref/$arm.log" 2>&1
    echo "$arm 2k-32k rc=$? $(date +%T)"
    timeout 200 evalkit run --device cuda --arm "$arm" --tasks "$LONG_TASKS" --lengths 64k,128k --limit "$LIMIT_LONG" \
      --no-progress --out "$OUT_DIR/ref/$arm-long" > "$OUT_DIR/ref/$arm-long.log" 2>&1
    echo "$arm 64k-128k rc=$? $(date +%T)" ) &
done
wait
echo "all done $(date +%T)"
