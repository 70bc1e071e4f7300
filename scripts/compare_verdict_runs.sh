#!/usr/bin/env bash
# The paired reports of the committed H200 verdict runs (issue 12), regenerated on any machine:
#   bash scripts/compare_verdict_runs.sh
# - A/A: the sweep's fp32 arm against a second fp32 process at 8k (must be 0 discordant, Δ log-prob 0)
# - fp16, bf16, fp8_e4m3 and the m3 truncation control against fp32, 2k-32k and 128k
# - the matched-store-point truncation controls at 32k, gated (--fail-on loss), with a brief report
set -u
cd "$(dirname "$0")/.."
S=results/verdicts/h200-sweep
C=results/verdicts/h200-controls-32k
R=results/verdicts/reports
mkdir -p "$R"
ek() { python -m evalkit "$@"; }
ek compare "$S/short/fp32" "$S/aa-fp32-8k" --intersection --md "$R/aa-fp32-8k.md" --json "$R/aa-fp32-8k.json" > /dev/null
echo "A/A rc=$?"
for part in short long; do
  for arm in fp16 bf16 fp8_e4m3 m3 "m3-rtz@chunk=64"; do
    ek compare "$S/$part/fp32" "$S/$part/$arm" --md "$R/$part-fp32-vs-$arm.md" --json "$R/$part-fp32-vs-$arm.json" > /dev/null
    echo "$part $arm rc=$?"
  done
done
for arm in m3-rtz@chunk=64 m2-rtz@chunk=64 m1-rtz@chunk=64; do
  ek compare "$C/fp32@chunk=64" "$C/$arm" --fail-on loss --md "$C/compare-$arm.md" --json "$C/compare-$arm.json" > /dev/null
  echo "control $arm gate rc=$? (0 pass, 1 gate failed)"
done
ek compare "$C/fp32@chunk=64" "$C/m2-rtz@chunk=64" --fail-on loss --brief --md "$R/gated-brief-m2-rtz.md" > /dev/null
echo "brief rc=$?"
