#!/usr/bin/env bash
# Usage (device, repository root; no carry needed): bash results/nemotron-h-48b-h200/run.sh $OUT
# One H200 call: a random-weight Nemotron-H-47B-dims model (config.json here, 46.79 B params, 87.2 GiB
# of bf16 weights) through the in-process engine in five arms on the same 32 prompts x 2048 tokens
# + 128 greedy new tokens: fp32, fp16, bf16 and the positive controls fp8_e4m3 and m3-rtz.
# Only scripts/bench_ssd.py's engine section runs; each arm's row is written to bench_ssd.json as
# soon as it finishes, so the 290 s timeout keeps every finished arm. Expected wall: ~200 s.
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
timeout 290 python3 scripts/bench_ssd.py --out "$OUT" --skip correctness,copy,decode,prefill \
  --engine-config results/nemotron-h-48b-h200/config.json \
  --engine-arms fp32,fp16,bf16,fp8_e4m3,m3-rtz --engine-workload 32,2048,128 > "$OUT/bench.log" 2>&1
echo "bench_ssd exit $?" | tee "$OUT/status.txt"
tail -8 "$OUT/bench.log"
