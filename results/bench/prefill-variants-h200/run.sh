#!/usr/bin/env bash
# One H200 call (issue 15, then 14 with what is left), each part under its own time limit:
# 1. the KDA prefill variants: split vs fused vs FLA chunk_kda at 8k/32k/128k, the fused kernel's
#    GPU check against float64 and split, its tile sweep at 32k -> $OUT/pv.{json,md}, pv_log.txt;
# 2. a whole 128k prompt at Kimi-Linear-48B dims through the engine, MLA prefill flash vs triton,
#    then triton with the fused KDA prefill -> $OUT/mla_engine*.json;
# 3. the 48b-fp32 drift part (sdpa MLA prefill) for the seconds left, as scripts/drift_resume_call.sh does.
# Usage on the device (carry .whl): bash results/bench/prefill-variants-h200/run.sh SECONDS
set -o pipefail
LIMIT=${1:-500}
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 240 python3 scripts/bench_kernels.py --prefill-variants --out /tmp/pv 2>&1 | tee "$OUT/pv_log.txt"
cp /tmp/pv/bench_kernels.json "$OUT/pv.json"; cp /tmp/pv/bench_kernels.md "$OUT/pv.md"
timeout 90 python3 scripts/bench_mla_prefill.py --out /tmp/me --parts engine --modes flash,triton \
  --repeats 3 --mode-budget-s 30 2>&1 | tee "$OUT/mla_engine_log.txt"
cp /tmp/me/bench_mla_prefill.json "$OUT/mla_engine.json"
EVALKIT_KDA_PREFILL=fused timeout 60 python3 scripts/bench_mla_prefill.py --out /tmp/mf --parts engine \
  --modes triton --repeats 3 --mode-budget-s 25 2>&1 | tee -a "$OUT/mla_engine_log.txt"
cp /tmp/mf/bench_mla_prefill.json "$OUT/mla_engine_fused.json"
LEFT=$(( LIMIT - SECONDS - 40 ))
if [ "$LEFT" -gt 90 ]; then
  MIN=$(python3 -c "print(round($LEFT / 60, 1))")
  mkdir -p /tmp/d
  timeout $(( LEFT + 20 )) python3 scripts/gpu_drift.py --out /tmp/d --parts 48b-fp32 --prompts 16 \
    --length-48b 131072 --max-minutes "$MIN" --resume --mla-prefill sdpa 2>&1 | tee "$OUT/log.txt"
  (cd /tmp/d && tar czf - .) | split -b 7000000 - "$OUT/d.part."
fi
ls -la "$OUT"
