#!/usr/bin/env bash
# One device call (H200), issue 41: the retiled Mamba2 SSD prefill (kernels/ssd_prefill, wrapper TILE
# bt=32 bp=64 bn=32, 8 warps, 2 stages: no spill on sm_90 by ptxas offline) on the GPU:
#   1. the fp32-twin check over every state format with its self-test (bit-exactness on the GPU);
#   2. scripts/bench_ssd.py sections correctness + prefill (T = 4k, 32k, 128k at NemotronH dims) with
#      FLA's chunk_simple_gla beside, and two more tiles timed and checked as "ours_<tile>":
#      64,32,128,4,3 (the pre-retile tile: whole N, 64-token blocks, 4 warps; spills 1.4 KB offline)
#      and 32,32,32,8,2 (twice the programs, spills 216 B offline).
# Usage (device, repository root, after nothing else): bash results/ssd-prefill-retile-h200/run.sh $OUT
# Expected wall time: ~20 s setup + <= 40 s twin check + <= 120 s bench = <= ~180 s. Files back: 6 (status, verify.txt/.json, bench.log, bench/bench_ssd.json/.md).
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache TRITON_DEFAULT_FP_FUSION=1
timeout 40 python3 -m evalkit verify-kernels --device cuda --self-test --launches 200 --json $OUT/verify.json \
  > $OUT/verify.txt 2>&1
echo "verify-kernels exit $?" >> $OUT/status.txt
timeout 120 python3 scripts/bench_ssd.py --out $OUT/bench --budget-s 100 --skip copy,decode,engine \
  --prefill-tile 64,32,128,4,3 --prefill-tile 32,32,32,8,2 > $OUT/bench.log 2>&1
echo "bench_ssd exit $?" >> $OUT/status.txt
cat $OUT/status.txt; tail -4 $OUT/verify.txt; grep -E "prefill" $OUT/bench.log | tail -4
