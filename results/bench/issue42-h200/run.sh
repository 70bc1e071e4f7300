#!/usr/bin/env bash
# Three device calls on one H200 (issue 42's goals on the whole 48B model and the H200's kernels):
#   call1: the 128k prompt at the default store points (state stored every 2,048 tokens, several
#          store chunks per forward) against one store chunk per forward, then the engine's three
#          arms on all 1,319 GSM8K-shaped prompts (goal 3);
#   call2: the KDA decode table against FLA and copy bandwidth (goal 1), the prefill lengths against
#          FLA (goal 2; the budget reached 32k), the engine's three arms again (goal 3);
#   call3: the prefill lengths again (8k, 32k, 128k), then the fp16 arm with every decode step timed
#          on the host and by CUDA events (../engine-step-gap/probe.py, "after").
# Usage (device, repository root, carrying .whl): bash results/bench/issue42-h200/run.sh OUT call1|call2|call3
set -u
OUT=${1:?usage: run.sh OUT call1|call2|call3}
CALL=${2:?usage: run.sh OUT call1|call2|call3}
source scripts/device_setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
s=$(date +%s)
engine() {  # the three arms, 1,319 prompts x 256 tokens, the whole 27-layer model
  mkdir -p "$1"
  timeout "$2" python3 scripts/bench_engine.py --out "$1" --parts arms --budget-s $(( $2 - 10 )) --reserve-s 0 \
    --keep-prompts > "$1/log.txt" 2>&1
  echo "engine exit $? after $(( $(date +%s) - s )) s"
  grep -E "device floor|arm .*wall" "$1/log.txt" | cut -c1-300
  rm -f "$1/bench_engine.md" "$1/arms_progress.jsonl"
}
lengths() {  # the fp32 (tf32x3) and bf16 prefill forms against FLA's chunk_kda
  mkdir -p "$1"
  timeout "$2" python3 scripts/bench_prefill.py --out "$1" --parts lengths --budget-s $(( $2 - 10 )) > "$1/log.txt" 2>&1
  echo "prefill exit $? after $(( $(date +%s) - s )) s"
  grep -E "lengths \{" "$1/log.txt" | cut -c1-420
}
case "$CALL" in
  call1)
    CALL_S=0 LONG_S=200 ROWS="pieces,chunk per forward" bash results/bench/long-prompt-h200/run.sh "$OUT/call1"
    engine "$OUT/call1/engine" 310 ;;
  call2)
    mkdir -p "$OUT/call2/decode"
    timeout 150 python3 scripts/bench_kernels.py --out "$OUT/call2/decode" \
      --skip correctness,twin,prefill,prefill_detail,decode_sweep --budget-s 130 > "$OUT/call2/decode/log.txt" 2>&1
    echo "decode exit $? after $(( $(date +%s) - s )) s"
    lengths "$OUT/call2/prefill" 170
    engine "$OUT/call2/engine" 250 ;;
  call3)
    lengths "$OUT/call3/prefill" 270
    mkdir -p "$OUT/call3/step-gap"
    timeout 170 python3 results/bench/engine-step-gap/probe.py after --out "$OUT/call3/step-gap" --layers 27 \
      --parts arms --arms fp16 --budget-s 150 --reserve-s 0 --keep-prompts > "$OUT/call3/step-gap/log.txt" 2>&1
    echo "step-gap exit $? after $(( $(date +%s) - s )) s"
    grep -E "arm .*wall|^probe" "$OUT/call3/step-gap/log.txt" | cut -c1-900
    rm -f "$OUT/call3/step-gap/arms_progress.jsonl" "$OUT/call3/step-gap/bench_engine.md" ;;
  *) echo "usage: run.sh OUT call1|call2|call3" >&2; exit 2 ;;
esac
