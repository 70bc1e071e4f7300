#!/usr/bin/env bash
# Paired reports (evalkit compare against fp32) of the three reference models' retrieval sweeps run
# in one call (results/retrieval-three-families-h100/run.sh), from the committed run directories
#   results/retrieval-three-families-h100/{kda,gdn,mamba2}/<arm>/
# every arm that finished, into <model>/reports/; then the three families side by side
# (scripts/gdn_kda_side_by_side.py, which reads them when present).
#   bash scripts/three_family_reports.sh
set -eu
cd "$(dirname "$0")/.."
source scripts/sweep_reports.sh
R=results/retrieval-three-families-h100
for model in kda gdn mamba2; do
  [ -d "$R/$model/fp32" ] || continue
  arms=()
  for d in "$R/$model"/*/; do
    arm=$(basename "$d")
    [ "$arm" != fp32 ] && [ "$arm" != reports ] && [ -f "$d/summary.json" ] && arms+=("$arm")
  done
  [ ${#arms[@]} -gt 0 ] && sweep_reports "$R/$model" "$R/$model/reports" retrieval "${arms[@]}"
done
python scripts/gdn_kda_side_by_side.py > results/reference-model-mamba2/h200/side-by-side.md
echo "reports in $R/<model>/reports; side by side in results/reference-model-mamba2/h200/side-by-side.md"
