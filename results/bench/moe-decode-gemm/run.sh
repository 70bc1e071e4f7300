#!/usr/bin/env bash
# One device step: the MoE experts' decode GEMM, evalkit's Triton grouped GEMM against
# torch._grouped_mm at Kimi-Linear-48B's MoE dims (scripts/bench_moe.py: GPU correctness, the tile
# neighbours, the layer's whole decode step); then, with ENG_S > 0, the engine's arms
# (scripts/bench_engine.py --parts arms) for each of KERNELS (default "moe_decode=triton"; add
# "default" for the engine's own kernels on the same machine): the 48B model's 27 layers on an
# H200, its first 12 on an H100 (whose 80 GB cannot hold the rest).
# Usage (device, repository root, carrying .whl): bash results/bench/moe-decode-gemm/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
start=$(date +%s)
source scripts/device_setup.sh
mkdir -p "$OUT/moe"
timeout ${MOE_S:-240} python3 scripts/bench_moe.py --out "$OUT/moe" --budget-s $(( ${MOE_S:-240} - 40 )) \
  > "$OUT/moe/log.txt" 2>&1
echo "bench_moe exit $? after $(( $(date +%s) - start )) s"
grep -E "^\| [0-9]" "$OUT/moe/bench_moe.md" | cut -c1-160
grep -E "ERROR|Correctness" "$OUT/moe/log.txt" "$OUT/moe/bench_moe.md" | cut -c1-600
if [ "${ENG_S:-0}" -gt 0 ]; then
  layers=27
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || layers=12
  i=0
  for kernels in ${KERNELS:-moe_decode=triton}; do  # "default" for the engine's own kernels
    i=$(( i + 1 ))
    mkdir -p "$OUT/eng$i"
    timeout "$ENG_S" python3 scripts/bench_engine.py --out "$OUT/eng$i" --layers $layers --parts arms \
      --arms "${ARMS:-fp32,fp16,bf16}" --budget-s $(( ENG_S - 20 )) --reserve-s 0 --keep-prompts \
      --kernels "$kernels" > "$OUT/eng$i/log.txt" 2>&1
    echo "bench_engine ($layers layers, --kernels $kernels) exit $? after $(( $(date +%s) - start )) s"
    grep -E "device floor|arm .*wall" "$OUT/eng$i/log.txt" | cut -c1-400
    # what comes back is at most 8 files: the JSON holds the progress lines, and the Markdown is
    # written from it (scripts/bench_engine.py write_markdown)
    rm -f "$OUT/eng$i/arms_progress.jsonl" "$OUT/eng$i/bench_engine.md"
  done
fi
nvidia-smi --query-gpu=name --format=csv,noheader
echo "end after $(( $(date +%s) - start )) s"
