#!/usr/bin/env bash
# Sampled comparison on the CPU with the embedded reference model (issue 38, item 7); run from the
# repository root: bash results/sampled-cpu/run.sh. k = 3 samples per question at T = 0.7, 20
# questions of kv_recite @ 2048: fp32 vs fp16 with the same sampling seed (coupled), and fp16 with
# another seed (uncoupled: what sampling noise alone does to a paired comparison).
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=results/sampled-cpu
COMMON=(--tasks kv_recite --lengths 2048 --limit 20 --temperature 0.7 --samples-per-question 3
        --device cpu --no-progress --no-prompts)
$PY -m evalkit run --arm fp32 --sampling-seed 0 "${COMMON[@]}" --out $OUT/fp32
$PY -m evalkit run --arm fp16 --sampling-seed 0 "${COMMON[@]}" --out $OUT/fp16
$PY -m evalkit run --arm fp16 --sampling-seed 1 "${COMMON[@]}" --out $OUT/fp16-seed1
cd $OUT
for cand in fp16 fp16-seed1; do
  ../../$PY -m evalkit compare fp32 $cand --md compare-fp32-vs-$cand.md --json compare-fp32-vs-$cand.json || true
done
