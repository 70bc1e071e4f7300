#!/usr/bin/env bash
# One device call (H200, <= ~200 s), issue 41: the split SSD prefill (`variant="split"`,
# `--kernels ssd_prefill=split`: a sequential state pass, then every block's output in parallel)
# against the walk kernel (the default) and FLA's chunk_simple_gla at NemotronH dims, T = 4k / 32k /
# 128k, with three more tiles that compile without spills for the split kernels (offline, sm_90:
# 64,64,32,8,2; 64,32,32,4,2; 32,64,64,8,2); each row also says whether split and walk agree to the
# last bit (output and stored state) on the GPU. Copy, decode, correctness and engine are skipped.
# Usage (device, repository root, carrying .whl): bash results/ssd-prefill-split/run.sh OUT
# OUT ends with one archive (a call returns at most 8 files).
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache TRITON_DEFAULT_FP_FUSION=1
W=/tmp/ssd-split && rm -rf $W && mkdir -p $W "$OUT"
timeout ${BUDGET_S:-200} python3 scripts/bench_ssd.py --out $W/bench --budget-s $(( ${BUDGET_S:-200} - 20 )) \
  --skip correctness,copy,decode,engine \
  --prefill-tile 64,64,32,8,2 --prefill-tile 64,32,32,4,2 --prefill-tile 32,64,64,8,2 > $W/bench.log 2>&1
echo "bench_ssd exit $?" | tee $W/status.txt
grep -E "prefill" $W/bench.log | tail -n 4
tar czf "$OUT/ssd-split.tgz" -C $W .
ls -la "$OUT"
