#!/usr/bin/env bash
# Issue 12: the precision sweep on the shipped reference model, one H200, one device call (<= 8 min).
#
#   bash results/verdicts/h200-sweep/run.sh OUTDIR [LIMIT_SHORT] [LIMIT_128K]     # defaults 64 and 24
#
# Arms: the round-to-nearest ladder fp32 (baseline), fp16 (10 bits), bf16 (7), m5, m4, m3, m2
# (simulated mantissa widths, fp32 range), fp8_e4m3, and two positive controls that truncate at a
# store every 64 prompt tokens (m3-rtz@chunk=64, bf16-rtz@chunk=64: a bias that accumulates, the
# one precision loss measured to bite, see issue 12). Tasks: passkey and niah_single_1, the two the
# model does at 128k (results/reference-model/README.md).
#
# Two sweeps run side by side (the host work, building and tokenizing prompts, is single-threaded
# per process; the GPU is shared):
#   OUTDIR/short: 2k, 8k, 32k with LIMIT_SHORT questions per task and length, delta = 5 pp
#                 (tasks pooled per length: n = 2 x 64 = 128, enough to show non-inferiority at 5 pp
#                 when the arms agree);
#   OUTDIR/long:  128k with LIMIT_128K questions, delta = 10 pp (n = 48 pooled).
# Sizing: per arm the short sweep prefills 2 x 64 x 42k = 5.4M tokens and the long one
# 2 x 24 x 128k = 6.3M (~6-7 s each at ~0.9M tok/s); the reference answer's log-probability costs
# only forced decode steps (a copy of the post-prompt state); the chunk=64 arms take ~2,000 padded
# prefill steps; questions are built (~1.5 s per 128k doc) and tokenized once per sweep; each arm
# pays its kernels' first compile and a CUDA-graph capture. Estimate 5-7 minutes; each sweep stops
# itself at 7 min 50 s. Everything finished is on disk: the same command again resumes (asks only
# what is missing) and writes the summaries.
#
# Output: OUTDIR/{short,long}/<arm>/ (run directories), OUTDIR/{short,long}/sweep.{json,md,png},
# OUTDIR/{short,long}.log. A CPU smoke test of the mechanics (the engine of this branch has
# fp32/fp16/bf16 only):
#   DEVICE=cpu ARMS=fp32,bf16,bf16@chunk=64 SHORT=1k LONG=2k bash results/verdicts/h200-sweep/run.sh /tmp/x 2 2
set -u
OUT_DIR=${1:?usage: results/verdicts/h200-sweep/run.sh OUTDIR [LIMIT_SHORT] [LIMIT_128K]}
LIMIT_SHORT=${2:-64}
LIMIT_LONG=${3:-24}
ARMS=${ARMS:-fp32,fp16,bf16,m5,m4,m3,m2,fp8_e4m3,m3-rtz@chunk=64,bf16-rtz@chunk=64}
SHORT=${SHORT:-2k,8k,32k}
LONG=${LONG:-128k}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
start=$(date +%s)
sweep() {  # name lengths limit margin
  timeout 470 python3 -m evalkit sweep --device "$DEVICE" --arms "$ARMS" --tasks passkey,niah_single_1 \
    --lengths "$2" --limit "$3" --margin "$4" --no-progress --out "$OUT_DIR/$1" > "$OUT_DIR/$1.log" 2>&1
  echo "sweep $1 ($2, $3 questions) rc=$? after $(( $(date +%s) - start )) s"
}
sweep short "$SHORT" "$LIMIT_SHORT" 0.05 &
sweep long "$LONG" "$LIMIT_LONG" 0.10 &
wait
echo "(rc 124: stopped at the time limit; run the same command again to resume)"
for part in short long; do
  echo "=== $part"; grep -E "^evalkit sweep:" "$OUT_DIR/$part.log" | tail -n 12
  [ -f "$OUT_DIR/$part/sweep.md" ] && cat "$OUT_DIR/$part/sweep.md"
done
