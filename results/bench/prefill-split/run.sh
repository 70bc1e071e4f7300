#!/usr/bin/env bash
# One device call, issue 42 goal 2: the fp32 prefill form with its tf32x3 operands split by bit
# arithmetic (kernels/tf32x3.py; Nsight Compute showed Triton's emulated cvt.rna.tf32 to be half
# the scan's instructions, results/bench/prefill-ncu/). The split sweep at 32k (each set of
# launches against the default in the same process, every output and state bit compared), then
# 8k/32k/128k against FLA's chunk_kda (stream; stream_swept, the sweep's fastest tiles where they
# differ from the defaults, a split set only if bit-identical; called stream_split in the first
# call; stream_bf16; medians of 3 interleaved runs), then per-kernel times. SWEEP_ONLY=... names
# the swept parts (default: split).
# Usage (device, repository root, carrying .whl): bash results/bench/prefill-split/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${BENCH_S:-540} python3 scripts/bench_prefill.py --out "$OUT" --parts sweep,lengths,kernels \
  --sweep-kinds fp32 --sweep-only ${SWEEP_ONLY:-split} --no-adopt --budget-s ${BUDGET_S:-400} > "$OUT/log.txt" 2>&1
echo "bench_prefill exit $?"
grep -E "split|lengths|stream" "$OUT/bench_prefill.md" | head -n 30
nvidia-smi --query-gpu=name --format=csv,noheader
