#!/usr/bin/env bash
# One H200 call (<= 9.5 min), three bounded parts:
#   1. the GDN kernels against FLA (scripts/bench_gdn.py: correctness, copy bandwidth, decode,
#      prefill; no engine section), alone on the GPU so its timings are clean       (issue 18)
#   2. positive controls at 32k with matched store points (every 64 prompt tokens): fp32 against
#      truncation to 3, 2 and 1 mantissa bits, 128 questions per task on passkey and
#      niah_single_1, each arm an `evalkit run` directory (paired by `evalkit compare` here)  (issue 12)
#   3. alongside 2: the drift study of the reference model with fp32 weights at 128k, 16 prompts,
#      prefill and decode modes with the A/A floor (scripts/gpu_drift.py --parts ref-fp32)   (issue 14)
# Everything lands in OUTDIR/controls_drift.tar.gz.
#   bash results/verdicts/h200-controls-32k/run.sh OUTDIR
set -u
OUT_DIR=${1:?usage: results/verdicts/h200-controls-32k/run.sh OUTDIR}
W=/tmp/controls_drift
mkdir -p "$W/controls" "$OUT_DIR"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 scripts/bench_gdn.py --out "$W/bench-gdn" --skip engine --budget-s 100 > "$W/bench-gdn.log" 2>&1
echo "1. bench_gdn rc=$? after $(( $(date +%s) - t0 )) s"
timeout 400 python3 scripts/gpu_drift.py --out "$W/drift-ref-fp32" --parts ref-fp32 --prompts 16 \
  --max-minutes 6.3 > "$W/drift.log" 2>&1 &
for arm in fp32@chunk=64 m3-rtz@chunk=64 m2-rtz@chunk=64 m1-rtz@chunk=64; do
  timeout 330 python3 -m evalkit run --device cuda --arm "$arm" --tasks passkey,niah_single_1 --lengths 32k \
    --limit 128 --no-progress --out "$W/controls/$arm" > "$W/controls/$arm.log" 2>&1 &
done
wait
echo "2/3. controls and drift done after $(( $(date +%s) - t0 )) s"
for arm in m3-rtz@chunk=64 m2-rtz@chunk=64 m1-rtz@chunk=64; do
  python3 -m evalkit compare "$W/controls/fp32@chunk=64" "$W/controls/$arm" --md "$W/controls/compare-$arm.md" \
    --json "$W/controls/compare-$arm.json" > /dev/null 2>&1
  echo "compare $arm rc=$?"; grep -m3 -i "verdict\|loss" "$W/controls/compare-$arm.md"
done
tail -3 "$W/drift.log"
tar -czf "$OUT_DIR/controls_drift.tar.gz" -C /tmp controls_drift
