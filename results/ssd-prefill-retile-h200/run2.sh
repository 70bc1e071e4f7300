#!/usr/bin/env bash
# Device call 2 (H200), issue 41: the speed of evalkit's Mamba2 SSD kernels against FLA's
# scalar-gate peers at NemotronH dims, which call 1 did not reach (its float64 correctness section
# ate the budget): scripts/bench_ssd.py sections copy (bandwidth), decode (B 1..512, fp32/fp16/bf16
# pools, CUDA graphs, vs fused_recurrent_simple_gla) and prefill (T 4k/32k/128k vs chunk_simple_gla),
# the retiled default and the pre-retile tile (64,32,128,4,3) side by side. Correctness on the GPU
# was call 1's (`call1/`).
# Usage (device, repository root): bash results/ssd-prefill-retile-h200/run2.sh OUT   (<= ~230 s)
# Only copy + decode (the prefill rows came back from the first run of this script):
#   SKIP=correctness,engine,prefill BUDGET_S=100 bash results/ssd-prefill-retile-h200/run2.sh OUT
set -u
OUT=${1:?usage: run2.sh OUT}
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache TRITON_DEFAULT_FP_FUSION=1
mkdir -p "$OUT"
timeout $(( ${BUDGET_S:-190} + 20 )) python3 scripts/bench_ssd.py --out "$OUT/bench" --budget-s "${BUDGET_S:-190}" \
  --skip "${SKIP:-correctness,engine}" \
  --prefill-tile 64,32,128,4,3 > "$OUT/bench.log" 2>&1
echo "bench_ssd exit $?" >> "$OUT/status.txt"
cat "$OUT/status.txt"; grep -E "decode|prefill|copy" "$OUT/bench.log" | tail -n 12
