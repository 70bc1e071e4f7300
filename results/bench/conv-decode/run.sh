#!/usr/bin/env bash
# One device call (H200 or H100), PARTS naming what runs (default "decode profile"; the second call
# ran "prefill"): the short conv's kernels per tile (probe.py: bits against the default tile, times,
# copy bandwidth): "decode" (block_c, B = 256 / 512), "prefill" ((block_t, block_c), a 16,301-token
# forward); "profile": the engine's kernel profile of the 48B model (`scripts/bench_engine.py --parts
# profile`: one prefill forward, decode steps at 512; all 27 layers on an H200, the first 12
# elsewhere: the weights fit no H100).
# Usage (device, repository root, carrying .whl): [PARTS=...] bash results/bench/conv-decode/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
s=$(date +%s)
for part in ${PARTS:-decode profile}; do
  case $part in
    decode)
      timeout 120 python3 results/bench/conv-decode/probe.py "$OUT/conv/probe.json" > "$OUT/conv-log.txt" 2>&1
      echo "decode probe exit $? after $(( $(date +%s) - s )) s"; cut -c1-300 "$OUT/conv-log.txt" ;;
    prefill)
      timeout 150 python3 results/bench/conv-decode/probe.py "$OUT/conv/prefill.json" prefill \
        > "$OUT/conv-prefill-log.txt" 2>&1
      echo "prefill probe exit $? after $(( $(date +%s) - s )) s"; cut -c1-300 "$OUT/conv-prefill-log.txt" ;;
    profile)
      mkdir -p "$OUT/profile"
      layers=27
      nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || layers=12
      timeout 220 python3 scripts/bench_engine.py --out "$OUT/profile" --layers $layers --parts profile \
        --budget-s 200 > "$OUT/profile/log.txt" 2>&1
      echo "profile exit $? after $(( $(date +%s) - s )) s"
      grep -E "profile (prefill|decode)" "$OUT/profile/log.txt" | cut -c1-1500 ;;
  esac
done
