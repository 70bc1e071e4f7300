#!/usr/bin/env bash
# The last H200 batch of this session, as run (one device call, ~9.5 minutes, every part bounded):
#   A. the reference model, fp32/fp16/bf16 arms in parallel processes, at 2k/8k/32k   (issue 8)
#   C. evalkit drift on the reference model and on random 48B-dims weights (in parallel with A)  (issue 7)
#   B. the engine benchmark at Kimi-Linear-48B dims, quick mode                          (issue 4)
#   D. the kernel benchmark's prefill and twin-check sections                            (issue 3)
# Usage on the device: bash results/drift/h200/run.sh OUTDIR
# A record of a first-session call: part C no longer runs as written (gpu_drift.py has since
# dropped --decode-length for its many-prompt studies; see results/verdicts/h200-controls-32k/run.sh).
set -u
OUT_DIR=${1:?usage: results/drift/h200/run.sh OUTDIR}
mkdir -p "$OUT_DIR"/ref "$OUT_DIR"/drift "$OUT_DIR"/eng "$OUT_DIR"/kern
export PYTHONUNBUFFERED=1
TASKS=passkey,niah_single_1,niah_multikey_2,vt,kv_retrieval

for arm in fp32 fp16 bf16; do
  timeout 155 evalkit run --device cuda --arm "$arm" --tasks "$TASKS" --lengths 2k,8k,32k --limit 12 \
    --no-progress --out "$OUT_DIR/ref/$arm" > "$OUT_DIR/ref/$arm.log" 2>&1 &
done
timeout 160 python3 scripts/gpu_drift.py --out "$OUT_DIR/drift" --max-minutes 2.5 \
  --ref-length 65536 --length-48b 65536 --decode-length 65536 > "$OUT_DIR/drift/log.txt" 2>&1
wait
echo "A/C done $(date +%T)"
timeout 145 python3 scripts/bench_engine.py --out "$OUT_DIR/eng" --quick --parts arms,capacity,invariance \
  --budget-s 115 > "$OUT_DIR/eng/log.txt" 2>&1
echo "B done rc=$? $(date +%T)"
timeout 225 python3 scripts/bench_kernels.py --out "$OUT_DIR/kern" --budget-s 200 \
  --skip correctness,copy,decode,decode_sweep,prefill_detail > "$OUT_DIR/kern/log.txt" 2>&1
echo "D done rc=$? $(date +%T)"
