#!/usr/bin/env bash
# One device call, issue 42 goal 2: the fp32 prefill form with W and / or Kd written by the wu
# launch as their tf32x3 halves (kernels/kda_prefill/stream.py, PRESPLIT_W / PRESPLIT_KD), which the
# scan feeds to the tensor cores from shared memory; the registers this frees allow a scan of 32
# value columns per program (kernels/compile_check.py: 176-252 registers, no spill, against 255 for
# the 16-column build). The presplit sweep at 32k (each (scan tile, presplit) against the default in
# the same process, every output and state bit compared), then 8k/32k/128k against FLA's chunk_kda
# (stream; stream_swept, the sweep's fastest bit-identical tile where it differs from the default;
# stream_bf16; medians of 3 interleaved runs), then per-kernel times.
# (h100-call1/ ran it at 045ed1a; since then W's presplit is removed, PRESPLIT_KD is PRESPLIT and
# the sweep lists the Kd tiles only.)
# Usage (device, repository root, carrying .whl): bash results/bench/prefill-presplit/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout ${BENCH_S:-540} python3 scripts/bench_prefill.py --out "$OUT" --parts sweep,lengths,kernels \
  --sweep-kinds fp32 --sweep-only ${SWEEP_ONLY:-presplit} --no-adopt --budget-s ${BUDGET_S:-400} > "$OUT/log.txt" 2>&1
echo "bench_prefill exit $?"
grep -E "presplit|lengths|stream" "$OUT/bench_prefill.md" | head -n 30
nvidia-smi --query-gpu=name --format=csv,noheader
