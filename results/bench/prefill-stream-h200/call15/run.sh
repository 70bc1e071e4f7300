#!/usr/bin/env bash
# The next H200 call for issue 15 after session 34 (bf16 prefill on par with FLA on single
# sequences, 0.89x on the varlen batch; `cu_seqlens` read on the host), each part under its own
# limit (what a part wrote under $OUT comes back if a later one is cut):
# 1. scan tiles on the varlen batch, one process per tile (a tile that faults the GPU takes its
#    process down): BV 64 with two stages (half the programs and half the redundant W/Kd/Qg loads
#    of the default), and the one-stage tile that faulted, with CUDA_LAUNCH_BLOCKING=1 so that
#    its log names the faulting launch -> $OUT/scan_*.log, $OUT/scan_*/;
# 2. a whole 128k prompt at 48B dims (Triton MLA + stream KDA prefill, fused combine; 6.01 s
#    before) -> $OUT/mla_engine.json, mla_log.txt;
# 3. the 1,319-prompt GSM8K-shaped workload once per state arm -> $OUT/arms/, arms_log.txt.
# Usage on the device (carry .whl): bash results/bench/prefill-stream-h200/call15/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
for t in "64,8,2,1" "64,4,2,1" "32,4,3,1"; do
  timeout 38 python3 scripts/bench_prefill.py --out "$OUT/scan_${t//,/_}" --parts sweep_varlen \
    --varlen-scan "$t" --budget-s 33 > "$OUT/scan_${t//,/_}.log" 2>&1
done
CUDA_LAUNCH_BLOCKING=1 timeout 38 python3 scripts/bench_prefill.py --out "$OUT/scan_fault" \
  --parts sweep_varlen --varlen-scan "16,4,1,1" --budget-s 33 > "$OUT/scan_fault.log" 2>&1
EVALKIT_MLA_PREFILL=triton timeout 70 python3 scripts/bench_mla_prefill.py \
  --out /tmp/me --parts engine --modes triton --repeats 3 --mode-budget-s 25 2>&1 | tee "$OUT/mla_log.txt"
cp /tmp/me/bench_mla_prefill.json "$OUT/mla_engine.json"
timeout 330 python3 scripts/bench_engine.py --out "$OUT/arms" --parts arms --budget-s 320 \
  --reserve-s 0 2>&1 | tee "$OUT/arms_log.txt"
ls -la "$OUT" "$OUT/arms"
