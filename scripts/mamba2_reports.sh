#!/usr/bin/env bash
# Paired reports (evalkit compare against fp32) of the Mamba2 reference model's H200 sweeps
# (issue 41; results/reference-model-mamba2/run.sh), from the committed run directories:
#   results/reference-model-mamba2/h200/{retrieval,short,suite}/<arm>/ (and cpu-sweep/<arm>/)
# every arm that finished (a sweep cut at its call's deadline keeps its finished arms), then the
# three families side by side (KDA v2, GDN twin, Mamba2; scripts/gdn_kda_side_by_side.py).
#   bash scripts/mamba2_reports.sh
set -eu
cd "$(dirname "$0")/.."
source scripts/sweep_reports.sh
M=results/reference-model-mamba2/h200
for group in retrieval short suite; do
  [ -d "$M/$group/fp32" ] || continue
  arms=()
  for d in "$M/$group"/*/; do
    arm=$(basename "$d")
    [ "$arm" != fp32 ] && [ -f "$d/summary.json" ] && arms+=("$arm")
  done
  [ ${#arms[@]} -gt 0 ] && sweep_reports "$M/$group" "$M/reports" "$group" "${arms[@]}"
done
# the CPU sweep (results/reference-model-mamba2/cpu-sweep/run.sh): passkey at 8k, fp32 weights
CPU=results/reference-model-mamba2/cpu-sweep
if [ -d "$CPU/fp32" ]; then
  arms=()
  for d in "$CPU"/*/; do
    arm=$(basename "$d")
    [ "$arm" != fp32 ] && [ "$arm" != reports ] && [ -f "$d/summary.json" ] && arms+=("$arm")
  done
  [ ${#arms[@]} -gt 0 ] && sweep_reports "$CPU" "$CPU/reports" cpu "${arms[@]}"
fi
python scripts/gdn_kda_side_by_side.py > "$M/side-by-side.md"
echo "reports in $M/reports; side by side in $M/side-by-side.md"
