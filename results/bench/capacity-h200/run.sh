#!/usr/bin/env bash
# One device call (H200): issue 42's goal 5 (the benefit side: per arm the state bytes per sequence,
# the sequences of 32k / 128k context that fit beside the 48B-dims weights, the decode throughput
# with every one of those slots full) and goal 4 (where the GPU main job's time goes from the
# command line: each arm twice, the second with Triton's cache warm, plus a profile of one run).
# Usage (device, from the repository root, carrying .whl): bash results/bench/capacity-h200/run.sh $OUT
set -u
OUT=${1:?usage: run.sh OUT}
W=/tmp/capacity-h200 && rm -rf $W && mkdir -p $W
source scripts/device_setup.sh
# the image's site-packages take no __pycache__: without a prefix every process compiles every module
# it imports again (~7 s), which an installed machine does once; give it a writable cache
export PYTHONPYCACHEPREFIX=/tmp/pycache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $W/gpu.txt
mkdir -p $W/capacity
python3 scripts/bench_engine.py --out $W/capacity --parts capacity --budget-s 240 --capacity-steps 5 \
  > $W/capacity/log.txt 2>&1 || true
mkdir -p $W/mainjob
for arm in fp16 fp32; do
  for rep in 1 2 3; do
    t0=$(date +%s%N)
    python3 -m evalkit run --arm $arm --out $W/mainjob/runs/$arm-$rep --no-progress > $W/mainjob/run-$arm-$rep.txt 2>&1
    rc=$?
    echo "evalkit run --arm $arm (repeat $rep): $(( ($(date +%s%N) - t0) / 1000000 )) ms wall, exit $rc" >> $W/mainjob/timings.txt
  done
done
python3 -X importtime -c "import evalkit.cli, evalkit.engine, evalkit.backends.local" 2> $W/mainjob/importtime.txt
python3 -m cProfile -o $W/mainjob/fp16.prof -m evalkit run --arm fp16 --out $W/mainjob/runs/fp16-prof --no-progress \
  > $W/mainjob/run-fp16-prof.txt 2>&1
python3 - "$W/mainjob/fp16.prof" > $W/mainjob/profile_top.txt <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(60)
PY
rm -rf $W/mainjob/runs/*/samples.jsonl.prompts 2>/dev/null
tar czf $OUT/capacity-h200.tgz -C $W .
ls -la $OUT
