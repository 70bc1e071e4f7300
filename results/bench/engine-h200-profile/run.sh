#!/usr/bin/env bash
# One H200 call for issues 15 and 14, each part under its own time limit:
# 1. where the engine's GPU time goes at Kimi-Linear-48B dims (bench_engine --parts profile: one
#    prefill forward and decode steps at 512 sequences, kernels by category) and transformers + FLA
#    swept over batch sizes for its fastest (--hf-batches) -> engine.{json,md}, engine_log.txt;
# 2. the long-context run cold/warm x3 after the calibrated document fitting -> lc.json, lc_log.txt;
# 3. the 48b-fp32 drift part (sdpa MLA prefill) for the seconds left, as scripts/drift_resume_call.sh does
#    (continuing drift-carry/runs when carried) -> log.txt, d.part.*.
# Parts 1-2 come back as one tarball (a call returns at most 8 files).
# Usage on the device (carry .whl, and drift-carry once it exists): bash results/bench/engine-h200-profile/run.sh SECONDS
set -o pipefail
LIMIT=${1:-560}
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/misc
timeout 230 python3 scripts/bench_engine.py --out /tmp/be --parts profile,transformers \
  --hf-batches 8,32,128,256 --budget-s 210 2>&1 | tee /tmp/misc/engine_log.txt
cp /tmp/be/bench_engine.json /tmp/misc/engine.json; cp /tmp/be/bench_engine.md /tmp/misc/engine.md
timeout 170 python3 scripts/bench_long_context_run.py --out /tmp/lc --modes cold,warm --repeats 3 2>&1 \
  | tee /tmp/misc/lc_log.txt
cp /tmp/lc/bench_long_context_run.json /tmp/misc/lc.json
(cd /tmp/misc && tar czf "$OUT/misc.tgz" .)
LEFT=$(( LIMIT - SECONDS - 40 ))
if [ "$LEFT" -gt 90 ]; then
  MIN=$(python3 -c "print(round($LEFT / 60, 1))")
  mkdir -p /tmp/d
  if [ -d drift-carry/runs ]; then cp -r drift-carry/runs /tmp/d/; fi
  timeout $(( LEFT + 20 )) python3 scripts/gpu_drift.py --out /tmp/d --parts 48b-fp32 --prompts 16 \
    --length-48b 131072 --max-minutes "$MIN" --resume --mla-prefill sdpa 2>&1 | tee "$OUT/log.txt"
  (cd /tmp/d && tar czf - .) | split -b 7000000 - "$OUT/d.part."
fi
ls -la "$OUT"
