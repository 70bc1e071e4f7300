#!/usr/bin/env bash
# The first H200 call of session 36 for issue 15, three sweeps -> $OUT/{k,p,m}.tgz and logs:
# 1. decode with the one-warp tiles (32x1, 16x1: sums over K by shuffles; the 16-bit pools' 64-72%
#    of copy bandwidth is the goal furthest off, 85%);
# 2. the fp32 prefill form's scan (three stages without spills; the fused output, which spills but
#    spares the 1 GB of chunk states at 32k), output and wu tiles, then lengths with what won
#    (goal 0.5x FLA, at 0.44x);
# 3. the bf16 MLA prefill kernel's tiles (never swept; 2.93 of the 128k prompt's 5.65 s).
# Usage on the device (carry .whl): bash results/bench/decode-sweep-h200-s36/run.sh
set -o pipefail
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
timeout 170 python3 scripts/bench_kernels.py --out /tmp/k --skip correctness,decode,prefill,twin,prefill_detail \
  > /tmp/k.log 2>&1
cp /tmp/k.log /tmp/k/ 2>/dev/null; tail -n 12 /tmp/k.log
timeout 260 python3 scripts/bench_prefill.py --out /tmp/p --parts sweep,lengths --sweep-only wu,scan,output \
  --sweep-kinds fp32 --budget-s 230 > /tmp/p.log 2>&1
cp /tmp/p.log /tmp/p/ 2>/dev/null; grep -E "sweep|lengths" /tmp/p.log | tail -n 25
timeout 150 python3 scripts/bench_mla_prefill.py --out /tmp/m --parts attention --dtypes bf16 --modes triton \
  --tiles "bf16:128,64,8,3;128,128,8,2;128,32,4,2;64,64,4,2;64,64,4,3;128,64,8,1" --repeats 3 --mode-budget-s 10 \
  > /tmp/m.log 2>&1
cp /tmp/m.log /tmp/m/ 2>/dev/null; tail -n 15 /tmp/m.log
for d in k p m; do tar czf "$OUT/$d.tgz" -C /tmp "$d"; done
