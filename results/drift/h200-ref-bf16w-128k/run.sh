#!/usr/bin/env bash
# One H200 call (<= 7 min): the Triton store/load of every state format against the rounding
# oracle, bit for bit, with store and load in separate launches (issue 12; the first H200 run had
# them in one launch and read stale fp8 codes), alongside the reference model's drift study with
# bf16 weights at 128k, 16 prompts, prefill and decode modes with the A/A floor (issue 14).
#   bash results/drift/h200-ref-bf16w-128k/run.sh OUTDIR
set -u
OUT_DIR=${1:?usage: results/drift/h200-ref-bf16w-128k/run.sh OUTDIR}
W=/tmp/oracle_drift
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1
timeout 360 python3 scripts/gpu_drift.py --out "$W/drift-ref-bf16" --parts ref-bf16 --prompts 16 \
  --max-minutes 5.6 > "$W/drift.log" 2>&1 &
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_formats.py -k bit_for_bit > "$W/store_oracle.log" 2>&1
echo "store == oracle rc=$? $(tail -1 "$W/store_oracle.log")"
wait
tail -3 "$W/drift.log"
tar -czf "$OUT_DIR/oracle_drift.tar.gz" -C /tmp oracle_drift
