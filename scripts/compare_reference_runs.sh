#!/usr/bin/env bash
# Paired reports of the reference model's H200 arms (results/reference-model-v1/runs/), written next
# to them: compare-fp32-vs-{fp16,bf16}{,-long,-passkey-128k}.{md,json,png}. CPU, a few seconds.
# Usage: bash scripts/compare_reference_runs.sh [RESULTS_DIR]
set -eu
DIR=${1:-results/reference-model-v1}
for arm in fp16 bf16; do
  for set in "" -long -passkey-128k; do
    base="$DIR/runs/h200-fp32$set" cand="$DIR/runs/h200-$arm$set" stem="$DIR/compare-fp32-vs-$arm$set"
    [ -d "$base" ] && [ -d "$cand" ] || continue
    evalkit compare "$base" "$cand" --md "$stem.md" --json "$stem.json" --plot "$stem.png" >/dev/null
  done
done
